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
        # the descriptor itself (the class attribute is the unbound function: put back, it
        # would no longer bind ``self``)
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


def test_backend_swapped_and_put_back_between_collectives_is_refused():
    """R34e-3: swapped after one recorded collective and put back before the next (FSDP2's
    backward all-gather, which the stand-in does not record, ran in between): the swap is
    seen when it is registered."""
    def step(w, x):
        dpg, tpg = w.mesh["dp"].get_group(), w.mesh["tp"].get_group()
        dist.all_reduce(x, group=dpg)
        orig = dpg._get_backend(CPU)  # noqa: SLF001
        dpg._register_backend(CPU, BT.UCC, tpg._get_backend(CPU))  # noqa: SLF001
        dpg._register_backend(CPU, BT.MPI, orig)  # noqa: SLF001
        assert dpg._get_backend(CPU) is orig  # noqa: SLF001
        dist.all_reduce(x, group=dpg)
        return x + 1

    found, refused = _trace(step)
    assert found and "seen when it was registered" in found[0][1], found
    assert refused and "another backend" in refused


def test_the_world_is_clean_again_after_a_swap():
    with fake_world(MESH, {"dp": 0, "tp": 0}) as w:
        dpg, tpg = w.mesh["dp"].get_group(), w.mesh["tp"].get_group()
        dpg._register_backend(CPU, BT.UCC, tpg._get_backend(CPU))  # noqa: SLF001
        assert backend_problem()
    with fake_world(MESH, {"dp": 0, "tp": 0}):
        assert backend_problem() is None and world_problem() is None


def test_register_backend_outside_a_world_is_torchs():
    from spec_lang.torch_frontend import group_identity as gi

    assert vars(dist.ProcessGroup)["_register_backend"] is gi._registering  # noqa: SLF001
    assert not gi._BY_NAME and not gi._SWAPPED  # noqa: SLF001


def test_fsdp_over_a_mesh_of_no_world_axis_is_refused_by_name():
    """R35c-4 (was an internal DimsError): ``fully_shard`` over ``DeviceMesh.from_group`` of a
    ``new_group`` names a dim that is no axis of the mesh ``parallelize`` is given: refused
    when ``parallelize`` returns, naming the dim and what to pass instead."""
    import types

    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    user = types.ModuleType("user_parallelize")     # the train file's module, as it binds it
    user.fully_shard = fully_shard
    with fake_world(MESH, {"dp": 0, "tp": 0}):
        mine = DeviceMesh.from_group(dist.new_group([0, 2]), "cpu", mesh_dim_names=("fsdp",))
        with pytest.raises(PlanError, match=r"the mesh's dim 'fsdp' is no axis of the mesh "
                           r"parallelize is given .* \(mesh\['dp'\]\)$"), \
                record_data_parallel([user]):
            user.fully_shard(nn.Sequential(nn.Linear(2, 2)), mesh=mine)
