"""What the fake world cannot answer is refused (``spec_lang/torch_frontend/fake_answers.py``;
adversarial rounds 35a / 35d: R35a-1, R35d-3, R35d-6, R35d-4), in seconds, in-process on a fake
world with the capture's guard (``thread_guard.threads_refused``) around the train file's code.
The slow proves of the plan files are in ``tests/adversarial/test_round35a.py`` and
``test_round35d.py``.

* a collective on a real tensor (``dist.all_reduce``, ``pg.allreduce``, a functional
  collective, ``all_gather_object``) is refused with the caller's line, also when the error is
  caught and also from another thread; a direct call of the backend's method is refused;
* a store of the train file's own (``TCPStore``, ``FileStore``, ``HashStore``, a
  ``PrefixStore`` over one of them) and a rendezvous are refused, also when imported;
* meta and fake tensors' collectives, torch's own ``new_group`` (a ``PrefixStore`` over the
  world's store) and everything outside the train file's code are as before;
* a group whose rendezvous store is not ``"<name>/"`` over the world's store is no axis
  (R35d-4: ``PrefixStore.__init__`` replaced while the groups are made).
"""

from __future__ import annotations

import _thread
import time

import pytest
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import fake_answers, new_groups
from spec_lang.torch_frontend.fake_answers import REAL_MESSAGE, importing, installed
from spec_lang.torch_frontend.thread_guard import threads_refused
from spec_lang.torch_frontend.world import fake_world

HERE = __file__
HELD_START = _thread.start_new_thread      # held from import, as r35a_01 holds it


@pytest.fixture
def world():
    with installed(), fake_world({"dp": 2}, {"dp": 0}) as w:
        yield w.mesh["dp"].get_group()


def _refused(match, fn):
    with pytest.raises(PlanError, match=match):
        with threads_refused(HERE):
            try:
                fn()
            except Exception:  # noqa: BLE001 -- the train file swallows the error
                pass


REAL = rf"{HERE}:\d+: {REAL_MESSAGE}"


def test_real_all_reduce_is_refused_even_if_caught(world):
    _refused(REAL, lambda: dist.all_reduce(torch.ones(1), group=world))


def test_real_all_reduce_uncaught_names_the_line(world):
    with pytest.raises(PlanError, match=REAL + r" \(c10d::allreduce_"):
        with threads_refused(HERE):
            dist.all_reduce(torch.ones(1), group=world)


@pytest.mark.parametrize("call", [
    lambda g, t: g.allreduce([t]),
    lambda g, t: dist.broadcast(t, 0, group=g),
    lambda g, t: dist.all_gather([torch.ones(1), torch.ones(1)], t, group=g),
    lambda g, t: dist.all_gather_into_tensor(torch.ones(2), t, group=g),
    lambda g, t: dist.reduce_scatter_tensor(t, torch.ones(2), group=g),
    lambda g, t: dist.all_gather_object([None, None], 3, group=g),
    lambda g, t: torch.ops._c10d_functional.wait_tensor(
        torch.ops._c10d_functional.all_reduce(t, "sum", g.group_name)),
])
def test_every_route_to_a_real_collective_is_refused(world, call):
    _refused(REAL, lambda: call(world, torch.ones(1)))


def test_the_backends_method_is_refused(world):
    backend = world._get_backend(torch.device("cpu"))  # noqa: SLF001
    _refused(rf"{HERE}:\d+: a collective called on the process group's backend directly "
             r"\(\w+.allreduce\)", lambda: backend.allreduce([torch.ones(1)]))


def test_a_threads_real_collective_is_refused(world):
    out = []

    def work():
        t = torch.ones(1)
        try:
            dist.all_reduce(t, group=world)
        finally:
            out.append(t.item())

    def run():
        HELD_START(work, ())
        for _ in range(500):
            if out:
                break
            time.sleep(0.002)
    _refused(REAL, run)
    assert out == [1.0]


@pytest.mark.parametrize("make", [
    lambda tmp: dist.TCPStore("127.0.0.1", 29500, is_master=False),
    lambda tmp: dist.FileStore(str(tmp / "f"), 2),
    lambda tmp: dist.HashStore(),
    lambda tmp: dist.rendezvous("env://"),
    lambda tmp: next(dist.rendezvous(f"file://{tmp / 'r'}?rank=0&world_size=2")),
])
def test_a_store_of_its_own_is_refused(world, make, tmp_path):
    _refused(rf"{HERE}:\d+: the train file (makes its own key-value store|runs a rendezvous)",
             lambda: make(tmp_path))


def test_a_store_of_its_own_when_imported_is_refused(tmp_path):
    with pytest.raises(PlanError, match=rf"{HERE}:\d+: the train file makes its own key-value "
                       r"store \(FileStore\)"):
        with importing(HERE):
            try:
                dist.FileStore(str(tmp_path / "f"), 2)
            except Exception:  # noqa: BLE001
                pass


def test_outside_the_train_files_code_stores_are_torchs(tmp_path):
    s = dist.HashStore()
    s.set("k", "v")
    assert s.get("k") == b"v"
    p = dist.PrefixStore("p/", s)
    p.set("k", "w")
    assert p.get("k") == b"w"


def test_outside_the_train_files_code_a_real_collective_is_not_recorded(world):
    with pytest.raises(RuntimeError, match=REAL_MESSAGE):
        dist.all_reduce(torch.ones(1), group=world)


def test_meta_and_fake_tensors_and_new_group_are_as_before(world):
    with threads_refused(HERE):
        m = torch.ones(2, device="meta")
        dist.all_reduce(m, group=world)
        dist.barrier(group=world)
        g = dist.new_group([0, 1])           # torch's own PrefixStore over the world's store

        def step(x):
            y = x * 2
            dist.all_reduce(y, group=world)
            return y
        gm = make_fx(step, tracing_mode="fake")(torch.ones(3))
    assert "allreduce" in str(gm.graph)
    assert new_groups.made_log()["made"] and g is not None


def test_installed_gives_torchs_kernels_back():
    before = torch._C._dispatch_dump("c10d::allreduce_")  # noqa: SLF001
    with installed():
        assert torch._C._dispatch_dump("c10d::allreduce_") != before  # noqa: SLF001
    assert torch._C._dispatch_dump("c10d::allreduce_") == before  # noqa: SLF001


def _dp_groups(crossed_on_me: bool):
    tp = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    n0, n1 = f"{c10d._world.group_count}/", f"{c10d._world.group_count + 1}/"  # noqa: SLF001
    init = c10d.PrefixStore.__init__
    swap = {n0: n1, n1: n0} if crossed_on_me else {}

    def crossed(self, prefix, store):
        init(self, swap.get(prefix, prefix), store)
    c10d.PrefixStore.__init__ = crossed
    try:
        dp = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    finally:
        c10d.PrefixStore.__init__ = init
    return tp, dp


@pytest.mark.parametrize("crossed", [False, True])
def test_a_group_met_under_another_name_is_no_axis(crossed):
    """R35d-4 (r35d_05): rank 2 crosses the dp groups' rendezvous prefixes."""
    with fake_world({"dp": 2, "tp": 2}, {"dp": 1, "tp": 0}):
        _dp_groups(crossed)
        made = [m for m in new_groups._MADE if m.pg is not None]  # noqa: SLF001
        dp = next(m for m in made if m.ranks == (0, 2))
        assert dp.usable is (not crossed)
        assert new_groups.axis_of(dp.pg)[0] == (None if crossed else "dp")


def test_a_group_store_over_another_store_is_no_axis():
    """The group's prefix kept, the store under it another group's (the keys land elsewhere)."""
    with fake_world({"dp": 2, "tp": 2}, {"dp": 0, "tp": 0}):
        other = c10d._world.pg_map[dist.new_group([0, 1])][1]  # noqa: SLF001
        init = c10d.PrefixStore.__init__

        def moved(self, prefix, store):
            init(self, prefix, other if prefix.endswith("/") and prefix[0].isdigit() else store)
        c10d.PrefixStore.__init__ = moved
        try:
            g = dist.new_group([0, 2])
        finally:
            c10d.PrefixStore.__init__ = init
        assert new_groups.axis_of(g)[0] is None
        assert fake_answers.prefix_log()


@pytest.mark.parametrize("call", [
    lambda g: dist.monitored_barrier(group=g, wait_all_ranks=True),
    lambda g: c10d.monitored_barrier(group=g),
    lambda g: g.monitored_barrier(),
])
def test_monitored_barrier_is_refused_even_if_caught(world, call):
    """R36c-3: gloo runs it, the fake backend raises: the train file's fallback is refused."""
    _refused(rf"{HERE}:\d+: dist.monitored_barrier|ProcessGroup.monitored_barrier",
             lambda: call(world))


def test_monitored_barrier_outside_the_train_files_code_is_torchs(world):
    with pytest.raises(ValueError, match="only implemented for GLOO"):
        dist.monitored_barrier(group=world)
