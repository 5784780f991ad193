"""Every public name of the trainer package is listed in docs/trainer.md (STYLE rule 1)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "trainer.md"
MODULES = ["trainer", "trainer.api", "trainer.errors", "trainer.pipeline", "trainer.model", "trainer.data",
           "trainer.tokenizer", "trainer.schedule", "trainer.strategies", "trainer.strategies.plan",
           "trainer.strategies.planned", "trainer.strategies.paper_plans", "trainer.strategies.checkfree_adam",
           "trainer.distributed"]


@pytest.mark.parametrize("module", MODULES)
def test_all_names_are_documented(module):
    text = DOC.read_text(encoding="utf-8")
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if f"`{name}`" not in text]
    assert not missing, f"{module}.__all__ names missing from docs/trainer.md: {missing}"
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.__all__ lists {name!r} but it does not exist"
