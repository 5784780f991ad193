"""A small real end-to-end sweep: the real trainer on synthetic text, all five strategies."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

WORDS = ("the king and queen of a far land spoke to their people about the sea wind rain night day "
         "light dark love war peace bread wine gold silver stone river hill town field horse sword "
         "song tale friend enemy brother sister father mother child old young fair foul true false").split()


def synthetic_text(n_words: int = 40_000, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    words = rng.choice(WORDS, size=n_words)
    lines = [" ".join(words[i:i + 12]).capitalize() + "." for i in range(0, n_words, 12)]
    return "\n".join(lines) + "\n"


@pytest.mark.slow   # ~16 s; test_regime_ci_instance is CI's real sweep instance
def test_real_sweep_writes_csv_pngs_and_table(tmp_path):
    data = tmp_path / "corpus.txt"
    data.write_text(synthetic_text())
    out = tmp_path / "out"
    env = dict(os.environ, SHARDPROOF_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "simulator.cli", "simulate", "sweep", "--preset", "quick", "--data", str(data),
         "--iterations", "4", "--eval-every", "2", "--failure-rates", "0.3", "--seeds", "0",
         "--target-loss", "100", "--out", str(out), "--no-progress"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    for strategy in ("no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant"):
        assert strategy in p.stdout
    assert "time to validation loss <= 100" in p.stdout
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["strategy"] for r in rows} == {"no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant"}
    # target 100 nats/token is met by the first evaluation, at simulated time 0
    assert all(r["reached"] == "1" and float(r["mean_time_to_target_s"]) == 0.0 for r in rows)
    for png in ("loss_vs_time.png", "time_to_target.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
