"""A collective's process group is the object the world made for a mesh axis, not a name
(``group_identity.py``; adversarial round 33b, R33b-1 and R33b-2), checked on a fake world
with ``make_fx`` as the capture traces (seconds; the slow proves of the round's plans are in
``tests/adversarial/test_round33b.py``).

* a group renamed (``ProcessGroup._set_group_name``) is still its own axis: the world's tp
  group renamed as dp is traced as tp (before or after its all-reduce); a group that is not
  the world's carrying an axis's name is refused;
* a name re-registered in c10d's registry (``_unregister_process_group`` /
  ``_register_process_group``) to another group is refused at the functional collective that
  resolves it, even when the name is given back afterwards (r33b_09's restore); re-registered
  to its own group (r33b_10) it is not;
* an untouched world is accepted and its group constants named by the world's names.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.group_identity import (checked, constants_by_identity, name_of,
                                                     refuse_foreign_groups, world_groups)
from spec_lang.torch_frontend.tracedata import ProcessGroupRef
from spec_lang.torch_frontend.world import fake_world

MESH = {"dp": 2, "tp": 2}
C10D = torch._C._distributed_c10d  # noqa: SLF001


def _trace(step, mesh=MESH, coords=None):
    """``step(world)`` traced as the capture does; (findings, problems of the constants,
    the group constants by node target, the world's names)."""
    with fake_world(mesh, coords or {a: 1 for a in mesh}) as w:
        found: list = []

        def f(x):
            return step(w, x)
        gm = make_fx(checked(f, found), tracing_mode="fake")(torch.ones(4))
        bad = constants_by_identity(gm)
        consts = {n.target: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"
                  and isinstance(getattr(gm, n.target), ProcessGroupRef)}
        names = {a: n for n, (a, _) in world_groups().items()}
    return found, bad, consts, names


def _axes(consts, names):
    by = {v: k for k, v in names.items()}
    return sorted(by.get(r.group_name, "?") for r in consts.values())


def test_untouched_world_is_accepted():
    def step(w, x):
        dist.all_reduce(x, group=w.mesh["tp"].get_group())
        return funcol.all_reduce(x, "sum", w.mesh["dp"]) + 1
    found, bad, consts, names = _trace(step)
    assert not found and not bad
    assert _axes(consts, names) == ["tp"]


def test_world_group_renamed_is_traced_as_its_own_axis():
    """r33b_01: the tp group renamed as dp, then all-reduced: tp (the object), not dp."""
    def step(w, x):
        tpg = w.mesh["tp"].get_group()
        tpg._set_group_name(w.mesh["dp"].get_group().group_name)  # noqa: SLF001
        dist.all_reduce(x, group=tpg)
        return x + 1
    found, bad, consts, names = _trace(step)
    assert not found and not bad
    assert _axes(consts, names) == ["tp"]


def test_world_group_renamed_after_its_all_reduce_is_traced_as_its_own_axis():
    """The name read when the trace is written (after the step) would say dp."""
    def step(w, x):
        tpg = w.mesh["tp"].get_group()
        dist.all_reduce(x, group=tpg)
        tpg._set_group_name(w.mesh["dp"].get_group().group_name)  # noqa: SLF001
        return x + 1
    found, bad, consts, names = _trace(step)
    assert not found and not bad
    assert _axes(consts, names) == ["tp"]


def test_foreign_group_renamed_as_an_axis_is_refused():
    """r33b_07: a group of the rank alone renamed as the dp group."""
    def step(w, x):
        singles = [dist.new_group([r]) for r in range(4)]
        g1 = singles[dist.get_rank()]
        g1._set_group_name(w.mesh["dp"].get_group().group_name)  # noqa: SLF001
        dist.all_reduce(x, group=g1)
        return x + 1
    found, bad, _, _ = _trace(step)
    assert found and "carries its name" in found[0][1]
    assert bad


def test_foreign_group_with_its_own_name_is_no_axis():
    """A ``dist.new_group`` of no axis's ranks keeps its own name, which names no axis
    (UNKNOWN downstream, as before): not refused here."""
    def step(w, x):
        g = dist.new_group([0, 3])     # rank 3 and rank 0: no axis's ranks
        dist.all_reduce(x, group=g)
        return x + 1
    found, bad, consts, names = _trace(step)
    assert not found and not bad
    assert _axes(consts, names) == ["?"]


def test_new_group_of_an_axis_ranks_is_the_axis():
    """Issue 11 (``new_groups.py``): ``dist.new_group([2, 3])``, rank 3's tp ranks, is tp (it
    was no axis before)."""
    def step(w, x):
        g = dist.new_group([2, 3])
        dist.all_reduce(x, group=g)
        return x + 1
    found, bad, consts, names = _trace(step)
    assert not found and not bad
    assert _axes(consts, names) == ["tp"]


def test_name_reregistered_to_another_group_is_refused():
    """r33b_08: the dp name resolves to the tp group at the functional all-reduce."""
    def step(w, x):
        name = w.mesh["dp"].get_group().group_name
        C10D._unregister_process_group(name)  # noqa: SLF001
        C10D._register_process_group(name, w.mesh["tp"].get_group())  # noqa: SLF001
        return funcol.all_reduce(x, "sum", w.mesh["dp"]) + 1
    found, _, _, _ = _trace(step)
    assert found and "resolves to another process group" in found[0][1]


def test_name_reregistered_and_restored_is_refused():
    """r33b_09: re-registered to a group of the rank alone, given back after the collective:
    nothing is left at the end of the step, the collective itself is refused."""
    def step(w, x):
        tpg = w.mesh["tp"].get_group()
        mine = [dist.new_group([r]) for r in range(4)][dist.get_rank()]
        name = tpg.group_name
        C10D._unregister_process_group(name)  # noqa: SLF001
        C10D._register_process_group(name, mine)  # noqa: SLF001
        y = funcol.all_reduce(x, "sum", w.mesh["tp"]) + 1
        C10D._unregister_process_group(name)  # noqa: SLF001
        C10D._register_process_group(name, tpg)  # noqa: SLF001
        return y
    found, _, _, _ = _trace(step)
    assert found and "resolves to another process group" in found[0][1]


def test_name_unregistered_is_refused():
    def step(w, x):
        name = w.mesh["dp"].get_group().group_name
        C10D._unregister_process_group(name)  # noqa: SLF001
        try:
            return funcol.all_reduce(x, "sum", w.mesh["dp"]) + 1
        finally:
            C10D._register_process_group(name, w.mesh["dp"].get_group())  # noqa: SLF001
    try:
        found, _, _, _ = _trace(step)
    except Exception:  # noqa: BLE001 -- torch refusing the unregistered name is fine too
        return
    assert found and "resolves to no group" in found[0][1]


def test_name_reregistered_to_its_own_group_is_accepted():
    """r33b_10: the same registry calls, the name kept on its own group."""
    def step(w, x):
        tpg = w.mesh["tp"].get_group()
        C10D._unregister_process_group(tpg.group_name)  # noqa: SLF001
        C10D._register_process_group(tpg.group_name, tpg)  # noqa: SLF001
        return funcol.all_reduce(x, "sum", w.mesh["tp"]) + 1
    found, bad, _, _ = _trace(step)
    assert not found and not bad


def test_refusal_names_the_line_and_the_group():
    def step(w, x):
        name = w.mesh["dp"].get_group().group_name
        C10D._unregister_process_group(name)  # noqa: SLF001
        C10D._register_process_group(name, w.mesh["tp"].get_group())  # noqa: SLF001
        return funcol.all_reduce(x, "sum", w.mesh["dp"]) + 1
    with fake_world(MESH, {"dp": 0, "tp": 1}) as w:
        found: list = []
        gm = make_fx(checked(lambda x: step(w, x), found), tracing_mode="fake",
                     record_stack_traces=True)(torch.ones(4))
        with pytest.raises(PlanError, match=r"'dp' axis's group name .* resolves to another"):
            refuse_foreign_groups(gm, found, __file__)


def test_name_of_outside_a_world_and_on_a_one_axis_mesh():
    """The world's groups are forgotten with it; on a one-axis mesh the axis's group is the
    default group, found by identity."""
    with fake_world({"dp": 2}, {"dp": 1}) as w:
        pg = dist.distributed_c10d._get_default_group()  # noqa: SLF001
        assert name_of(pg) == (w.mesh["dp"].get_group().group_name, None)
    assert world_groups() == {}
