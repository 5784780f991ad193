"""A mesh axis's group object runs on the backends the world made it with, and a data-parallel
unit's groups are the ones its mesh resolves to when ``fully_shard`` / ``replicate`` is called
(``group_identity.py``; adversarial round 34b, R34b-1 and R34b-4), checked on a fake world
(seconds; the slow proves are in ``tests/adversarial/test_round34b.py``).

* R34b-1: ``ProcessGroup._register_backend(cpu, BackendType.UCC, other._get_backend(cpu))``
  on a world group is refused at the next collective recorded, even when the backend is given
  back after it (r34b_03), and when left for the next step (after the step); re-registering
  the group's own backend (r34b_05) is not refused;
* R34b-4: the dp name re-registered to the tp group around ``fully_shard`` and given back
  before ``parallelize`` returns is refused; re-registered to dp itself (r34b_08) it is not,
  and the unit keeps the groups resolved at the call.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.dataparallel import record_data_parallel
from spec_lang.torch_frontend.group_identity import (backend_problem, checked, groups_at_call,
                                                     refuse_foreign_groups, world_problem)
from spec_lang.torch_frontend.world import fake_world

MESH = {"dp": 2, "tp": 2}
C10D = torch._C._distributed_c10d  # noqa: SLF001
CPU = torch.device("cpu")
BT = dist.ProcessGroup.BackendType


def _trace(step):
    """``step(world, x)`` traced as the capture does: (findings, the refusal after the step)."""
    with fake_world(MESH, {"dp": 1, "tp": 1}) as w:
        found: list = []
        gm = make_fx(checked(lambda x: step(w, x), found), tracing_mode="fake")(torch.ones(4))
        try:
            refuse_foreign_groups(gm, list(found), "train.py")
            refused = None
        except PlanError as e:
            refused = str(e)
    return found, refused


def test_untouched_world_has_its_backends():
    with fake_world(MESH, {"dp": 0, "tp": 0}):
        assert backend_problem() is None and world_problem() is None


def test_backend_replaced_by_another_groups_is_refused_at_the_collective():
    """r34b_01: the dp object given tp's cpu backend, then all-reduced over dp."""
    def step(w, x):
        dpg, tpg = w.mesh["dp"].get_group(), w.mesh["tp"].get_group()
        dpg._register_backend(CPU, BT.UCC, tpg._get_backend(CPU))  # noqa: SLF001
        dist.all_reduce(x, group=dpg)
        return x + 1
    found, refused = _trace(step)
    assert found and "backend" in found[0][1]
    assert refused and "_register_backend" in refused


def test_backend_replaced_and_given_back_is_refused_at_the_collective():
    """r34b_03 / r34b_02: a singleton's backend during a functional all-reduce, given back."""
    def step(w, x):
        dpg = w.mesh["dp"].get_group()
        own = dpg._get_backend(CPU)  # noqa: SLF001
        one = dist.new_group([dist.get_rank()])
        dpg._register_backend(CPU, BT.UCC, one._get_backend(CPU))  # noqa: SLF001
        y = funcol.all_reduce(x, "sum", w.mesh["dp"])
        dpg._register_backend(CPU, BT.MPI, own)  # noqa: SLF001
        return y + 1
    found, _ = _trace(step)
    assert found and "'dp' axis" in found[0][1] and "backend" in found[0][1]


def test_backend_replaced_after_the_last_collective_is_refused_after_the_step():
    def step(w, x):
        dpg, tpg = w.mesh["dp"].get_group(), w.mesh["tp"].get_group()
        dist.all_reduce(x, group=dpg)
        dpg._register_backend(CPU, BT.UCC, tpg._get_backend(CPU))  # noqa: SLF001
        return x + 1
    found, refused = _trace(step)
    assert not found
    assert refused and "when the step returned" in refused


def test_own_backend_reregistered_is_accepted():
    """r34b_05: the dp object's own backend under a new backend type: nothing changes."""
    def step(w, x):
        dpg = w.mesh["dp"].get_group()
        dpg._register_backend(CPU, BT.UCC, dpg._get_backend(CPU))  # noqa: SLF001
        dist.all_reduce(x, group=dpg)
        return x + 1
    found, refused = _trace(step)
    assert not found and refused is None


def test_class_get_backend_replaced_by_the_train_file_does_not_hide_it():
    """The backend reader is bound at import: a lying ``ProcessGroup._get_backend`` is not used."""
    with fake_world(MESH, {"dp": 0, "tp": 0}) as w:
        dpg, tpg = w.mesh["dp"].get_group(), w.mesh["tp"].get_group()
        # the class's own descriptor (a pybind instancemethod): restoring the function read
        # through the class would leave ``pg._get_backend(dev)`` unbound for later tests
        own, real = dpg._get_backend(CPU), vars(dist.ProcessGroup)["_get_backend"]  # noqa: SLF001
        dpg._register_backend(CPU, BT.UCC, tpg._get_backend(CPU))  # noqa: SLF001
        dist.ProcessGroup._get_backend = lambda self, dev: own  # noqa: SLF001
        try:
            assert backend_problem() is not None
        finally:
            dist.ProcessGroup._get_backend = real  # noqa: SLF001


def _parallelize(w, reregister_to):
    """r34b_07 / r34b_08: FSDP2 on mesh['dp'] with the dp name re-registered around it."""
    dp = w.mesh["dp"]
    name, dpg = dp.get_group().group_name, dp.get_group()
    model, to = nn.Sequential(nn.Linear(2, 2)), reregister_to(w)
    with record_data_parallel([]) as units:
        from torch.distributed.fsdp import fully_shard
        C10D._unregister_process_group(name)
        C10D._register_process_group(name, to)
        fully_shard(model, mesh=dp)
        C10D._unregister_process_group(name)
        C10D._register_process_group(name, dpg)
    return units, dpg


def test_fsdp_name_reregistered_to_tp_in_parallelize_is_refused():
    with fake_world(MESH, {"dp": 1, "tp": 0}) as w, \
            pytest.raises(PlanError, match="resolves, when the call runs, to another"):
        _parallelize(w, lambda w: w.mesh["tp"].get_group())


def test_fsdp_name_reregistered_to_itself_is_accepted_and_keeps_the_call_time_group():
    with fake_world(MESH, {"dp": 1, "tp": 0}) as w:
        units, dpg = _parallelize(w, lambda w: w.mesh["dp"].get_group())
        assert len(units) == 1 and units[0].group("dp") is dpg


def test_registry_left_changed_when_parallelize_returns_is_refused():
    with fake_world(MESH, {"dp": 0, "tp": 0}) as w:
        name = w.mesh["dp"].get_group().group_name
        with pytest.raises(PlanError, match="when parallelize returned"), \
                record_data_parallel([]):
            C10D._unregister_process_group(name)
            C10D._register_process_group(name, w.mesh["tp"].get_group())


def test_groups_at_call_outside_a_world_resolves_nothing():
    assert groups_at_call(None) == ({}, None)
