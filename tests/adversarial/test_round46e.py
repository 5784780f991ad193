"""Round 46e: break stop 46's fixes after round 46d, against cfbc3fc
(``tests/adversarial/ATTEMPTS.md``, "Round 46e"). Plans in ``plans/round46e/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp 2).

R46e-1: the DDP-based composable ``replicate`` (``torch.distributed._composable.replicate``)
changes the module's class to ``DDP<cls>`` (bases ``DDP``, ``cls``) for real; the stand-in
(``dataparallel.record_data_parallel``'s ``replicate``) leaves the class as it is. A plan
branching on ``isinstance(model, DDP)`` or ``type(model).__name__`` takes another branch:
a wrong plan EQUIVALENT (r46e_01), a right one NOT EQUIVALENT (r46e_02).

R46e-2: ``DDP<cls>`` (like ``FSDP<cls>`` / ``Replicate<cls>``) has a ``__deepcopy__`` that
raises ``AssertionError``; the stand-in's module deep-copies: a plan doubling the gradients
when ``copy.deepcopy(model)`` raises is wrong for real, EQUIVALENT (r46e_04). For
``fully_shard`` the stand-in's ``FSDP<cls>`` deep copy fails with a ``TypeError`` (its
``FSDPModule.__new__`` calls ``Linear.__init__()`` without arguments): refused (rc 3), sound.

R46e-4 (needless refusal): ``replicate.state(model)`` is None in the stand-in (torch's
``replicate`` never ran on the module): a right plan asserting it fails in capture (rc 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND46E = Path(__file__).resolve().parent / "plans" / "round46e"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


def test_r46e_1_ddp_replicate_isinstance_ddp_not_equivalent(tmp_path):
    """R46e-1: ``isinstance(model, DDP)`` after the DDP-based ``replicate`` doubles the
    gradients: truth wrong (w2 0.0033); EQUIVALENT 31 s at cfbc3fc. Since stop 46 (the module
    is a ``DDP<cls>``, ``dataparallel._as_fsdp_module``): NOT EQUIVALENT (14 s)."""
    out = _prove(ROUND46E / "r46e_01_ddp_replicate_isinstance_ddp_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r46e_1_ddp_replicate_class_name_right_equivalent(tmp_path):
    """R46e-1's right control: doubling when the class name is not ``DDPMLP``: truth right
    1.4e-17; NOT EQUIVALENT 31 s at cfbc3fc; EQUIVALENT since stop 46 (15 s)."""
    out = _prove(ROUND46E / "r46e_02_ddp_replicate_class_name_right.py", tmp_path)
    assert _equivalent(out), out


def test_r46e_2_ddp_replicate_deepcopy_not_equivalent(tmp_path):
    """R46e-2: doubling when ``copy.deepcopy(model)`` raises (DDP-based replicate): truth
    wrong (w2 0.0033); EQUIVALENT 46 s at cfbc3fc. Since stop 46 (torch's raising
    ``__deepcopy__``): exit 3, the train file catches the AssertionError (6 s)."""
    out = _prove(ROUND46E / "r46e_04_ddp_replicate_deepcopy_raises_wrong.py", tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46e_03_fsdp_deepcopy_raises_wrong.py",
    "r46e_05_root_recurse_reshard_after_backward_group_wrong.py",
    "r46e_07_hook_other_state_factor_seen_wrong.py",
    "r46e_10_nested_unit_in_group_member_reshard_after_backward_wrong.py",
    "r46e_11_root_no_recurse_reshard_after_backward_wrong.py",
])
def test_r46e_wrong_plans_not_equivalent(name, tmp_path):
    """Wrong plans (truth > 1e-3) the stand-in refutes (NOT EQUIVALENT 37-48 s) or refuses
    (r46e_03: rc 3, the stand-in's deep copy of FSDP<Linear> raises TypeError)."""
    out = _prove(ROUND46E / name, tmp_path)
    assert not _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r46e_06_hook_other_state_factor_seen_right.py",
    "r46e_08_group_factor_hook_two_backwards_right.py",
    "r46e_09_group_second_member_hook_sets_root_factor_right.py",
    "r46e_12_fsdp_replicate_hook_sets_root_factor_right.py",
])
def test_r46e_right_plans_equivalent(name, tmp_path):
    """Right plans (truth <= 1.4e-17) on stop 46's divide factor read at each state's
    post-backward (``fsdp_grads.flush_state``): EQUIVALENT 30-44 s at cfbc3fc."""
    out = _prove(ROUND46E / name, tmp_path)
    assert _equivalent(out), out


@pytest.mark.xfail(strict=True, reason="R46e-4: replicate.state(model) is None in the "
                   "stand-in (the real replicate was never applied): needless refusal")
def test_r46e_4_ddp_replicate_state_read_equivalent(tmp_path):
    """R46e-4: ``replicate.state(model)`` read in the step (DDP-based replicate), no effect on
    the numbers: truth right 1.4e-17; rc 3 11 s at cfbc3fc (the plan's own assert fails in
    capture: the state is None)."""
    out = _prove(ROUND46E / "r46e_13_ddp_replicate_state_read_right.py", tmp_path)
    assert _equivalent(out), out
