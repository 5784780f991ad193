"""Golden loss curve of the tiny config (STYLE rule 22): `step loss` lines in assets/, tolerance 1e-4.

The curve is data produced by this trainer (seed 0, the synthetic corpus of conftest.py,
one torch thread). Regenerate after an intended change with
`SHARDPROOF_REGEN_GOLDEN=1 pytest tests/trainer/test_trainer_golden.py` and review the diff.
Tolerance 1e-4 nats/token absorbs float summation-order differences between CPUs and
libraries; a change of the model, data order, loss scaling, clipping or Adam moves it by far more.
"""

from __future__ import annotations

import os
from pathlib import Path


GOLDEN = Path(__file__).parent / "assets" / "losses_tiny_seed0.txt"
TOLERANCE = 1e-4  # nats/token
STEPS = 15


def test_tiny_loss_curve_matches_golden(make_trainer):
    t = make_trainer(seed=0)
    losses = [t.train_step().loss for _ in range(STEPS)]
    if os.environ.get("SHARDPROOF_REGEN_GOLDEN"):
        GOLDEN.write_text("".join(f"{i + 1} {loss:.6f}\n" for i, loss in enumerate(losses)))
    rows = [line.split() for line in GOLDEN.read_text().splitlines() if line.strip()]
    expected = {int(step): float(loss) for step, loss in rows}
    assert sorted(expected) == list(range(1, STEPS + 1))
    for step, loss in enumerate(losses, start=1):
        assert abs(loss - expected[step]) <= TOLERANCE, (step, loss, expected[step])
