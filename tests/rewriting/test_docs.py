"""docs/rules.md's rule table is the registry's (generated, never hand-edited)."""

from __future__ import annotations

from pathlib import Path

from rewriting import RULES, RULESET
from rewriting.ruledoc import BEGIN, END, rule_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def test_rule_table_matches_registry():
    text = DOC.read_text()
    table = text[text.index(BEGIN):text.index(END) + len(END)]
    assert table == rule_table(), "regenerate with: python -m rewriting.ruledoc"


def test_every_rule_is_described():
    text = DOC.read_text()
    for r in RULES:
        assert f"`{r.name}`" in text


def test_ruleset_identity():
    assert RULESET["name"] == "tensor" and len(RULESET["sha256"]) == 64


def test_public_api_is_documented():
    import rewriting

    text = DOC.read_text() + (DOC.parent / "verifier-internals.md").read_text()
    missing = [n for n in rewriting.__all__ if n not in text]
    assert not missing, f"rewriting.__all__ names missing from the docs: {missing}"
