"""The package's exports match the reference in docs/simulator.md (docs/STYLE.md rule 1)."""

from __future__ import annotations

import re
from pathlib import Path

import simulator

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"


def test_all_matches_docs():
    text = DOC.read_text()
    block = text.split("Public names (`simulator.__all__`):", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`(\w+)`", block))
    assert documented == set(simulator.__all__)
    assert all(hasattr(simulator, name) for name in simulator.__all__)
