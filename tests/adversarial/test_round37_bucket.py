"""Round 37: the wrong variants of round 37's bucket rules (``tests/adversarial/ATTEMPTS.md``,
"Round 37: fixes (bucket accumulation)").

Round 37 lowers an in-place op through exactly one piece of a flat bucket
(``buckets.piece_write``: gradient accumulation into ``p.grad = flat[a:b].view_as(p)``,
Megatron's ``main_grad.add_``; R36b-3), a 1-d ``torch.zeros(n)`` cut by its slices into
consecutive pieces as a bucket of zeros (``buckets.zero_dims``; R36b-3, R36b-4) and
``flat.split(m)`` into pieces of ``m`` entries each (R36b-5). Each plan in ``plans/round37/`` is a
wrong variant of one of them (the docstrings say how); none may be EQUIVALENT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND37 = Path(__file__).resolve().parent / "plans" / "round37"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT (NOT EQUIVALENT, UNKNOWN or a refusal)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in ROUND37.glob("r37_*_wrong.py")))
def test_round37_bucket_mutant_is_not_accepted(name, tmp_path):
    """Wrong plans (the docstrings): never EQUIVALENT (verdicts measured in ATTEMPTS.md)."""
    from tests.adversarial.torch_prove import prove

    out = prove(ROUND37 / name, tmp_path)
    assert _not_accepted(out), out
