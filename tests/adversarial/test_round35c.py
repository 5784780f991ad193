"""Adversarial round 35c (``tests/adversarial/ATTEMPTS.md``, "Round 35c"), against wip/adv35c at
761d5b3 (= main: issue 11's ``new_groups.py``, a ``dist.new_group`` of exactly a mesh axis's
ranks through the rank is that axis; ``check_traces``: every traced rank made the same
``(ranks, name)`` calls, one group per set of ranks, not both the mesh's and a new group).
Plans in ``plans/round35c/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp),
``tests/adversarial/tp_truth.py FILE`` (dp x tp); gloo, float64.

* R35c-1 (false accept; ``r35c_01`` dp 2 x tp 2): the new group's backend is a custom one the
  train file registers (``dist.Backend.register_backend("borrow", creator)``) whose creator
  returns the tp group's backend object: the group has the dp ranks, torch's name and the
  backends it was made with, and runs over tp. Truth w1 0.0088, w2 0.018.
* R35c-2 (false accept; ``r35c_08`` dp 2 x tp 2): the rendezvous crossed. Every rank makes the
  same groups under the same names, but on ranks 2 and 3 the default store in
  ``_world.pg_map`` is a ``dist.Store`` moving one dp group's keys under the other's name while
  the dp groups are made: rank 0 meets rank 3, rank 1 meets rank 2. Truth w1 0.0078 / 0.0067,
  w2 0.0069 / 0.0076.
* R35c-3 (false refusal, fixed in round 36; ``r35c_05`` dp 2): Megatron's gloo duplicate of the dp group
  (``new_group(ranks, backend="gloo")``, unused in the step) crashes the capture: exit 3,
  torch's "INTERNAL ASSERT FAILED ... Not implemented" (no gloo group on the fake store).
* R35c-4 (false refusal; ``r35c_04`` dp 2 x tp 2): FSDP2 over
  ``DeviceMesh.from_group(new_group(dp ranks), "cpu", mesh_dim_names=("fsdp",))``: UNKNOWN, an
  internal error (``DimsError ... placement ('R', 'R') gives 44``).
* R35c-5 (false refusal, fixed in round 36; ``r35c_10`` dp 2 x tp 2): g11_02 with ``use_local_synchronization=True``
  on every ``new_group`` (every rank still calls every group in order): exit 3, "the rank at
  {'dp': 1, 'tp': 0} makes other dist.new_group groups" with two identical rank lists printed
  (the recorded names differ: a member's hash, a non-member's None).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND35C = Path(__file__).resolve().parent / "plans" / "round35c"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND35C / name, tmp_path)


# -- findings (open: strict xfail) --------------------------------------------------------------

@pytest.mark.slow
def test_r35c_1_custom_backend_borrowing_tp_is_not_accepted(tmp_path):
    """EQUIVALENT at 761d5b3 (4 goals, 64 s); truth w1 0.0088, w2 0.018 on every rank. Fixed
    (2acd1b3): a group made with ``backend=`` or after ``dist.Backend``'s registries changed is
    no axis; exit 3 (132 s, the group constant differs across ranks)."""
    out = _prove("r35c_01_dp_tp_new_group_custom_backend_borrows_tp.py", tmp_path)
    assert _not_accepted(out), out
    # round 36: said in the user's terms (was "the captured constant _torchbind_obj0 differs")
    assert "the process group a collective uses differs" in out.get("_err", ""), out


@pytest.mark.slow
def test_r35c_2_rendezvous_crossed_is_not_accepted(tmp_path):
    """EQUIVALENT at 761d5b3 (4 goals, 85 s); truth w1 0.0078 / 0.0067, w2 0.0069 / 0.0076.
    Fixed (2acd1b3): a group made while the default group's store (or ``_world``, its
    ``pg_map``, the default group) is not the world's is no axis; exit 3 (144 s)."""
    out = _prove("r35c_08_dp_tp_new_group_rendezvous_crossed.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r35c_3_megatron_gloo_duplicate_is_equivalent(tmp_path):
    """exit 3 at 761d5b3 (5 s, torch's INTERNAL ASSERT ... Not implemented); truth 2.8e-17.
    Fixed in round 36 (``new_groups._builtin_backend``: torch's own backend named is made on
    the fake one): EQUIVALENT (58 s, loaded)."""
    out = _prove("r35c_05_dp_new_group_with_gloo_duplicate_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R35c-4: FSDP2 over DeviceMesh.from_group of a "
                   "new_group is an internal error (DimsError, placement ('R', 'R'))")
def test_r35c_4_fsdp_over_from_group_mesh_is_equivalent(tmp_path):
    """UNKNOWN at 761d5b3 (exit 2, internal error, 117 s loaded); truth 2.8e-17. Round 36:
    a clean refusal instead (exit 3, 9 s, "the mesh's dim 'fsdp' is no axis of the mesh
    parallelize is given"; unit test in ``tests/torch_frontend/test_group_backends.py``)."""
    out = _prove("r35c_04_dp_tp_fsdp_from_new_group_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r35c_5_megatron_local_sync_is_equivalent(tmp_path):
    """exit 3 at 761d5b3 (133 s loaded); truth 6.9e-18 / 2.8e-17. Fixed in round 36
    (``check_traces`` leaves local groups, named from their ranks, out of the order
    comparison): EQUIVALENT (63 s)."""
    out = _prove("r35c_10_dp_tp_megatron_local_sync_right.py", tmp_path)
    assert _equivalent(out), out


# -- sound outcomes worth keeping -------------------------------------------------------------

@pytest.mark.slow
def test_r35c_custom_backend_borrowing_dp_is_refused_by_design(tmp_path):
    """R35c-1's control (the creator returns the mesh's dp backend; truth 2.8e-17): EQUIVALENT
    at 761d5b3 (58 s). Since R35c-1's fix a group on a backend of the train file's is no axis
    (the capture cannot tell this creator from R35c-1's): exit 3 (70 s), a false refusal by
    design."""
    out = _prove("r35c_02_dp_tp_new_group_custom_backend_borrows_dp_right.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r35c_rendezvous_store_identity_is_refused_by_design(tmp_path):
    """R35c-2's control (the store moves each key to itself; truth 6.9e-18): EQUIVALENT at
    761d5b3 (184 s loaded). Since R35c-2's fix a group made over a store that is not the
    world's is no axis (the capture cannot tell this store from R35c-2's): exit 3 (56 s), a
    false refusal by design."""
    out = _prove("r35c_09_dp_tp_new_group_rendezvous_store_identity_right.py", tmp_path)
    assert out["_rc"] == 3, out


@pytest.mark.slow
def test_r35c_fsdp_from_group_backend_swap_is_not_accepted(tmp_path):
    """R34e-3 on a from_group mesh of a new_group: UNKNOWN (29 s; R35c-4's internal error);
    truth w1 0.0114."""
    out = _prove("r35c_03_dp_tp_fsdp_from_new_group_backend_swapped_for_backward_all_gather.py",
                 tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r35c_default_group_on_1d_mesh_is_equivalent(tmp_path):
    """dist.all_reduce(p.grad) with group=None on a 1-D dp mesh: EQUIVALENT (28 s)."""
    out = _prove("r35c_06_dp_default_group_ddp_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.slow
def test_r35c_same_name_groups_are_refused(tmp_path):
    """Both dp groups given one name (_world.group_count put back): exit 3 (19 s; torch's
    duplicate-name check); the real run fails in gloo's rendezvous."""
    out = _prove("r35c_07_dp_tp_new_groups_same_name.py", tmp_path)
    assert _not_accepted(out), out
