"""Round 47 (the lead, R47-1): FSDP2's ``MixedPrecisionPolicy`` (torchtitan passes
``mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)`` to
every ``fully_shard``). Plans in ``plans/round47/``; truth: ``tests/adversarial/torch4_truth.py
FILE 2`` (dp 2, float64 parameters, bf16 compute, so a right plan differs by bf16 rounding only:
2e-5..1.2e-4; the wrong ones by 0.005..0.05).

R47-1: the stand-in accepted ``mp_policy`` and ignored it, so a model branching on a tensor's
dtype took the serial spec's path in the capture: a plan doubling a bf16 activation (r47_02) or a
block's bf16-cast input (r47_03) was EQUIVALENT at ff6b496; ``replicate(..., mp_policy=...)``
(the DDP-based one: TypeError on every rank for real, r47_06) was accepted too. Since round 47
the stand-in casts as FSDP2 does (``fsdp_mixed_precision.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND47 = Path(__file__).resolve().parent / "plans" / "round47"

pytestmark = pytest.mark.slow


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r47_01_mp_bf16_right.py",
    "r47_04_mp_no_input_cast_right.py",
    "r47_05_mp_output_dtype_right.py",
])
def test_r47_mixed_precision_right_plans_equivalent(name, tmp_path):
    """Right plans (truth: bf16 rounding only, <= 1.2e-4): EQUIVALENT; r47_04 (no input cast)
    and r47_05 (``output_dtype`` float32) take the branch as the real run does."""
    out = _prove(ROUND47 / name, tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r47_02_mp_activation_dtype_branch_wrong.py",
    "r47_03_mp_input_cast_branch_wrong.py",
])
def test_r47_1_dtype_branch_not_equivalent(name, tmp_path):
    """R47-1: truth wrong (0.016-0.049 against bf16 noise 5e-5); EQUIVALENT at ff6b496
    (mp_policy ignored); NOT EQUIVALENT since round 47."""
    out = _prove(ROUND47 / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r47_1_ddp_replicate_mp_policy_refused(tmp_path):
    """R47-1: the DDP-based ``replicate`` hands ``mp_policy`` to DDP, which raises a
    TypeError on every rank; exit 3 naming the argument."""
    out = _prove(ROUND47 / "r47_06_ddp_replicate_mp_policy_raises.py", tmp_path)
    assert out["_rc"] == 3 and "mp_policy" in out["_err"], out
