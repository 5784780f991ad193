"""A ``dist.new_group`` made with exactly a mesh axis's ranks through the rank is that axis
(``spec_lang/torch_frontend/new_groups.py``, issue 11), checked on a fake world with ``make_fx``
as the capture traces (seconds; the slow proves of the plans are in
``tests/adversarial/test_issue11.py``).

* the dp and tp groups Megatron's ``parallel_state`` makes (every rank makes every group) are
  traced as dp and tp on every rank of a dp 2 x tp 2 mesh; ``new_subgroups_by_enumeration``
  too;
* a subset, the whole world, a union of axes or the axis's ranks in another order
  (``sort_ranks=False``) is no axis (its own name: UNKNOWN downstream);
* the identity checks still hold: a new group renamed as an axis is refused, one whose backend
  is replaced (R34b-1) or whose ranks in ``_world.pg_group_ranks`` are rewritten is refused;
* a group made while a helper of ``distributed_c10d`` is replaced is no axis;
* :func:`check_traces`: the same calls on every trace pass, different ones are refused.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import new_groups
from spec_lang.torch_frontend.group_identity import (checked, constants_by_identity, name_of,
                                                     world_groups)
from spec_lang.torch_frontend.tracedata import ProcessGroupRef
from spec_lang.torch_frontend.world import fake_world, rank_of

MESH = {"dp": 2, "tp": 2}
CORNERS = [{"dp": d, "tp": t} for d in range(2) for t in range(2)]


def _megatron(rank):
    tp_groups = [dist.new_group([i * 2 + j for j in range(2)]) for i in range(2)]
    dp_groups = [dist.new_group([i * 2 + j for i in range(2)]) for j in range(2)]
    return {"tp": tp_groups[rank // 2], "dp": dp_groups[rank % 2]}


def _axis(pg):
    name, bad = name_of(pg)
    assert bad is None, bad
    return dict((n, a) for n, (a, _) in world_groups().items()).get(name)


@pytest.mark.parametrize("coords", CORNERS)
def test_megatron_groups_are_the_axes_on_every_rank(coords):
    with fake_world(MESH, coords):
        g = _megatron(rank_of(MESH, coords))
        assert _axis(g["dp"]) == "dp" and _axis(g["tp"]) == "tp"
        log = new_groups.made_log()
    assert [e[0] for e in log["made"]] == [(0, 1), (2, 3), (0, 2), (1, 3)]
    assert sorted(e[3] for e in log["made"] if e[3]) == ["dp", "tp"] and log["mesh"] == []


def test_new_subgroups_by_enumeration_is_the_axis():
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        mine, _ = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])
        assert _axis(mine) == "dp"


@pytest.mark.parametrize("ranks,kw", [([2], {}), ([0, 1, 2, 3], {}), ([0, 2, 3], {}),
                                      ([2, 0], {"sort_ranks": False})])
def test_other_ranks_are_no_axis(ranks, kw):
    """A subset, the whole world, a union, the dp ranks in the other order: no axis."""
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        pg = dist.new_group(ranks, **kw)
        name, bad = name_of(pg)
        assert bad is None and name == pg.group_name and _axis(pg) is None


def test_sorted_ranks_are_the_axis():
    """``new_group([2, 0])`` is sorted by torch (``sort_ranks=True``): dp's ranks."""
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        assert _axis(dist.new_group([2, 0])) == "dp"


def test_group_constant_named_as_the_axis_when_traced():
    with fake_world(MESH, {"dp": 0, "tp": 1}):
        g = _megatron(1)
        found: list = []

        def f(x):
            dist.all_reduce(x, group=g["dp"])
            return x + 1
        gm = make_fx(checked(f, found), tracing_mode="fake")(torch.ones(4))
        assert not found and not constants_by_identity(gm)
        names = {n: a for n, (a, _) in world_groups().items()}
        refs = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"
                and isinstance(getattr(gm, n.target), ProcessGroupRef)]
        assert [names.get(r.group_name) for r in refs] == ["dp"]


def test_new_group_renamed_as_an_axis_is_refused():
    with fake_world(MESH, {"dp": 1, "tp": 0}) as w:
        g = _megatron(2)
        g["dp"]._set_group_name(w.mesh["tp"].get_group().group_name)  # noqa: SLF001
        _, bad = name_of(g["dp"])
        assert bad and "renamed" in bad


def test_new_group_backend_replaced_is_refused():
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        g = _megatron(2)
        cpu = torch.device("cpu")
        g["dp"]._register_backend(cpu, dist.ProcessGroup.BackendType.UCC,  # noqa: SLF001
                                  new_groups._GET_BACKEND(g["tp"], cpu))  # noqa: SLF001
        _, bad = name_of(g["dp"])
        assert bad and "backends" in bad


def test_new_group_ranks_rewritten_is_refused():
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        g = _megatron(2)
        c10d._world.pg_group_ranks[g["dp"]] = {2: 0, 3: 1}  # noqa: SLF001
        _, bad = name_of(g["dp"])
        assert bad and "ranks" in bad


def test_new_group_made_with_a_replaced_helper_is_no_axis(monkeypatch):
    orig = c10d._process_group_name  # noqa: SLF001
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        monkeypatch.setattr(c10d, "_process_group_name", lambda *a, **k: orig(*a, **k))
        pg = dist.new_group([0, 2])
        monkeypatch.undo()
        assert _axis(pg) is None


def test_mesh_group_taken_is_recorded():
    with fake_world(MESH, {"dp": 1, "tp": 0}) as w:
        name_of(w.mesh["tp"].get_group())
        assert new_groups.made_log()["mesh"] == ["tp"]


def _tr(coords, made, mesh=()):
    return SimpleNamespace(coords=coords, new_groups={"made": made, "mesh": list(mesh)})


def test_check_traces():
    a = [((0, 1), "5", False, None), ((0, 2), "6", False, "dp")]
    b = [((0, 1), "5", False, "tp"), ((0, 2), "6", False, None)]
    new_groups.check_traces("f.py", [_tr({"dp": 0}, a), _tr({"dp": 1}, b)])
    new_groups.check_traces("f.py", [_tr({"dp": 0}, [], ["dp"]), _tr({"dp": 1}, [])])
    # the same calls, an unused duplicate of the dp ranks: fine
    dup = [*a, ((0, 2), "7", False, None)]
    new_groups.check_traces("f.py", [_tr({"dp": 0}, dup), _tr({"dp": 1}, dup)])
    with pytest.raises(PlanError, match="same order"):
        new_groups.check_traces("f.py", [_tr({"dp": 0}, a), _tr({"dp": 1}, b[:1])])
    with pytest.raises(PlanError, match="pipelined"):
        new_groups.check_traces("f.py", [_tr({"dp": 0}, a)], pipelined=True)


def test_check_traces_two_groups_of_the_same_ranks_taken_are_refused():
    """Rank 0 takes group 6, rank 2 group 7 (both of the dp ranks): with async_op the real
    ranks would pair collectives of other lines."""
    x = [((0, 2), "6", False, "dp"), ((0, 2), "7", False, None)]
    y = [((0, 2), "6", False, None), ((0, 2), "7", False, "dp")]
    with pytest.raises(PlanError, match="different dist.new_group groups"):
        new_groups.check_traces("f.py", [_tr({"dp": 0}, x), _tr({"dp": 1}, y)])


def test_check_traces_mesh_and_new_group_of_one_axis_are_refused():
    a = [((0, 2), "6", False, "dp")]
    with pytest.raises(PlanError, match="both the mesh's 'dp'"):
        new_groups.check_traces("f.py", [_tr({"dp": 0}, a), _tr({"dp": 1}, a, ["dp"])])


@pytest.mark.parametrize("asked,builtin", [
    ("gloo", True), ("GLOO", True), ("cpu:gloo", True), ("cpu:gloo,cuda:gloo", True),
    ("nccl", False), ("mpi", False), ("cpu:gloo,cuda:nccl", False),   # R36a-4
    (dist.Backend("gloo"), True), ("gloo2", False), ("fake", False), ("", False),
    ("cpu:gloo,cuda:mine", False), (None, False), (3, False),
    # R38a-5: torch's BackendConfig raises for these; left to torch, which raises in the
    # capture too
    ("cpu:gloo,cpu:gloo", False), ("gloo,cpu:gloo", False), ("cpu:gloo,", False),
    ("cuda:gloo", False)])     # R38c-4: no cpu backend
def test_builtin_backend(asked, builtin):
    assert new_groups._builtin_backend(asked) is builtin  # noqa: SLF001


@pytest.mark.parametrize("coords", CORNERS)
def test_megatron_gloo_duplicate_is_made_and_is_the_axis(coords):
    """R35c-3: ``new_group(ranks, backend="gloo")`` (Megatron's duplicate of every dp group)
    is made on the fake backend and, with the axis's ranks, is the axis."""
    with fake_world(MESH, coords):
        rank = rank_of(MESH, coords)
        g = _megatron(rank)
        gloo = [dist.new_group([i * 2 + j for i in range(2)], backend="gloo") for j in range(2)]
        assert _axis(g["dp"]) == "dp" and _axis(gloo[rank % 2]) == "dp"


def test_gloo_asked_after_the_registries_changed_is_no_axis():
    """R35c-1 kept: once the train file registered a backend, ``backend="gloo"`` is not taken
    for torch's (the group is made as asked, which the fake store cannot: an error, or no
    axis)."""
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        _megatron(2)
        B = dist.Backend
        saved = {n: dict(getattr(B, n)) for n in ("_plugins", "default_device_backend_map",
                                                  "backend_capability", "backend_type_map")}
        saved_list, saved_attrs = list(B.backend_list), set(vars(B))
        B.register_backend("gloo_r36", lambda *a, **k: None, devices=["cpu"])
        try:
            try:
                pg = dist.new_group([0, 2], backend="gloo")
            except Exception:  # noqa: BLE001 -- refused by torch itself on the fake store
                pg = None
            assert pg is None or _axis(pg) is None
        finally:
            for n, d in saved.items():
                getattr(B, n).clear()
                getattr(B, n).update(d)
            B.backend_list[:] = saved_list
            for a in set(vars(B)) - saved_attrs:
                delattr(B, a)
        assert new_groups._backend_registry() == new_groups._REGISTRY  # noqa: SLF001


def test_check_traces_local_groups_pair_by_name():
    """R35c-5: groups made with ``use_local_synchronization=True`` are named from their ranks;
    a non-member records no name (or makes no call): left out of the order comparison. Their
    names taken for an axis must still be one per set of ranks over every trace."""
    m = [((0, 1), "5", False, None), ((0, 2), "h02", True, "dp"), ((1, 3), None, True, None)]
    n = [((0, 1), "5", False, None), ((0, 2), None, True, None), ((1, 3), "h13", True, "dp")]
    new_groups.check_traces("f.py", [_tr({"dp": 0}, m), _tr({"dp": 1}, n)])
    new_groups.check_traces("f.py", [_tr({"dp": 0}, m), _tr({"dp": 1}, n[:1] + n[2:])])
    other = [*m[:1], ((0, 2), "h02b", True, "dp")]
    with pytest.raises(PlanError, match="different dist.new_group groups"):
        new_groups.check_traces("f.py", [_tr({"dp": 0}, m), _tr({"dp": 1}, other)])
    # the groups named by the shared count still must be the same on every rank
    with pytest.raises(PlanError, match="same order"):
        new_groups.check_traces("f.py", [_tr({"dp": 0}, m), _tr({"dp": 1}, n[1:])])


def test_a_group_of_no_axis_is_named_a_process_group_in_the_refusal():
    """Round 36: the refusal of a collective over a group that differs across ranks says
    "process group", not "the captured constant _torchbind_obj0"."""
    from spec_lang.torch_frontend.captured_constants import constant_differs_text

    t = constant_differs_text(ProcessGroupRef("7"), "_torchbind_obj0", "at rank {'dp': 1}")
    assert t.startswith("the process group a collective uses differs at rank {'dp': 1}: it is "
                        "no mesh axis's group") and "_torchbind" not in t
    t = constant_differs_text(torch.zeros(2), "_tensor_constant0", "from the zero coordinate's")
    assert t == ("the captured constant _tensor_constant0 differs from the zero coordinate's (a "
                 "tensor built from a size or the rank inside the step)")


def test_a_str_subclass_is_no_builtin_backend():
    """R36a-1: a ``str`` subclass reading "gloo" whose ``upper()`` says "FAKE" (torch's
    ``Backend(x)`` reads ``x.upper()``) is not taken for torch's gloo."""
    class Name(str):
        def upper(self):
            return "FAKE"

    assert not new_groups._builtin_backend(Name("gloo"))  # noqa: SLF001


@pytest.mark.parametrize("attr,value", [("__new__", lambda cls, name: "fake"),
                                        ("GLOO", "cpu:fake")])
def test_backend_class_attribute_replaced_is_tampering(monkeypatch, attr, value):
    """R36a-2: ``dist.Backend.__new__`` or ``Backend.GLOO`` replaced around ``new_group`` makes
    "gloo" another backend in the real run: ``_tampered``, so the group is made as asked."""
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        assert not new_groups._tampered()  # noqa: SLF001
        monkeypatch.setattr(dist.Backend, attr,
                            staticmethod(value) if attr == "__new__" else value)
        assert new_groups._tampered()  # noqa: SLF001
        monkeypatch.undo()
        assert not new_groups._tampered()  # noqa: SLF001


def test_default_group_entry_replaced_is_tampering():
    """The default group's ``pg_map`` entry holds the backend ``new_group`` takes without
    ``backend=``: an entry of the train file's (the store kept) is tampering."""
    with fake_world(MESH, {"dp": 1, "tp": 0}):
        w = c10d._world  # noqa: SLF001
        default = c10d._get_default_group()  # noqa: SLF001
        entry = w.pg_map[default]
        w.pg_map[default] = ("fake", entry[1])
        try:
            assert new_groups._tampered()  # noqa: SLF001
        finally:
            w.pg_map[default] = entry
        assert not new_groups._tampered()  # noqa: SLF001


@pytest.fixture
def snapshot():
    """pp_guard's snapshot of torch.distributed taken now, as the capture child takes it before
    the train file is imported; none again afterwards (other tests take a fresh one)."""
    from spec_lang.torch_frontend import pp_guard

    new_groups.watch()          # as the capture child: new_group watched, then the snapshot
    pp_guard.take_snapshot()
    yield
    pp_guard._SNAPSHOT[0] = None  # noqa: SLF001


def test_backend_class_constructor_replaced_is_tampering(monkeypatch, snapshot):
    """R36d-2 / R36d-3 / R36c-1: ``ProcessGroupGloo.__init__`` replaced (the real run's group
    built over another rendezvous, or this rank alone) is tampering: the group is no axis."""
    from torch._C import _distributed_c10d as C

    with fake_world(MESH, {"dp": 1, "tp": 0}):
        assert not new_groups._tampered()  # noqa: SLF001
        monkeypatch.setattr(C.ProcessGroupGloo, "__init__",
                            lambda self, *a, **k: None)
        assert new_groups._tampered()  # noqa: SLF001
        g = dist.new_group([0, 2])          # dp's ranks through rank 2
        assert new_groups.axis_of(g) == (None, None)
        monkeypatch.undo()
        assert not new_groups._tampered()  # noqa: SLF001
        assert new_groups.axis_of(dist.new_group([0, 2]))[0] == "dp"


def test_a_negative_timeout_or_a_backend_env_change_is_refused_even_if_caught(monkeypatch):
    """R36d-1: torch's gloo raises for a negative ``timeout=`` and for ``GLOO_SOCKET_IFNAME``
    naming no interface; the fake backend does not: refused in the train file's code even
    when the train file catches the error."""
    from datetime import timedelta

    from spec_lang.torch_frontend.thread_guard import threads_refused

    def caught(fn):
        try:
            fn()
        except Exception:  # noqa: BLE001 -- the train file's fallback
            pass

    with fake_world(MESH, {"dp": 1, "tp": 0}):
        with pytest.raises(PlanError, match=r"test_new_groups.py:\d+: dist.new_group with a "
                           r"timeout of -1 s .*refused even if the error is caught"):
            with threads_refused(__file__):
                caught(lambda: dist.new_group([0, 2], timeout=timedelta(seconds=-1)))
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-if0")
        with pytest.raises(PlanError, match=r"changed since the launch \(GLOO_SOCKET_IFNAME\)"):
            with threads_refused(__file__):
                caught(lambda: dist.new_group([0, 2], backend="gloo"))
        monkeypatch.undo()
        with threads_refused(__file__):     # as launched, a timeout of 0 s: as before
            assert new_groups.axis_of(dist.new_group([0, 2], timeout=timedelta(0)))[0] == "dp"


def test_new_group_raising_in_the_fake_world_is_refused_even_if_caught():
    """torch's ``new_group`` raising in the capture (here ``backend="nccl"`` on a CPU build)
    may not raise in the real run: the train file's fallback is refused."""
    from spec_lang.torch_frontend.thread_guard import threads_refused

    with fake_world(MESH, {"dp": 1, "tp": 0}):
        with pytest.raises(PlanError, match=r"dist.new_group raised in the capture's fake world"):
            with threads_refused(__file__):
                try:
                    dist.new_group([0, 2], backend="nccl")
                except Exception:  # noqa: BLE001
                    pass


def test_the_captures_own_pipelining_patches_are_no_tampering(snapshot):
    """Every capture runs inside ``pp_capture.pipelining``, whose patches (``all_reduce``,
    ``send`` / ``recv``, the stage's methods) differ from the snapshot: they are torch's for
    ``_tampered`` (faf97b6 took them for the train file's, and every ``new_group(backend=
    "gloo")`` was made as asked on the fake store: r36d_01 exit 3)."""
    from spec_lang.torch_frontend.pp_capture import capture_patches, pipelining

    with fake_world(MESH, {"dp": 1, "tp": 0}):
        with pipelining(__file__, cpu=True, in_meta=None):
            assert capture_patches()
            assert not new_groups._tampered()  # noqa: SLF001
            g = dist.new_group([0, 2], backend="gloo")
            assert new_groups.axis_of(g)[0] == "dp"
        assert capture_patches() == {}
