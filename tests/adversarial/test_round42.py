"""Stop 42's own findings (``tests/adversarial/ATTEMPTS.md``, "Stop 42"), against main at
cb38729. Plans in ``plans/round42/``. Truth: ``tests/adversarial/torch4_truth.py FILE 2`` (dp 2,
gloo, float64, two steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND42 = Path(__file__).resolve().parent / "plans" / "round42"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND42 / name, tmp_path)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="S42-1 (open, documented limit): FSDP2's root keeps its "
                   "unsharded parameters registered after the forward, the stand-in its stored "
                   "ones: a branch on parameter identity there takes the spec's path")
def test_s42_1_root_parameter_identity_after_the_forward_is_not_accepted(tmp_path):
    """EQUIVALENT at cb38729 (4 goals, 50 s); truth step 1 w1 0.0070, w2 0.0093 (wrong)."""
    out = _prove("r42_01_fsdp_root_param_identity_after_forward_wrong.py", tmp_path)
    assert _not_accepted(out), out
