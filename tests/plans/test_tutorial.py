"""docs/tutorial-own-model.md is run as written: its ``tinygpt.py`` blocks are the model and the
spec, and each ``plan <VERDICT>`` block, appended to them, must prove with that verdict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proofs.prover import prove
from spec_lang import load

DOC = (Path(__file__).resolve().parents[2] / "docs" / "tutorial-own-model.md").read_text()
BLOCKS = re.findall(r"```python ([^\n]*)\n(.*?)```", DOC, flags=re.S)
BASE = "".join(code for info, code in BLOCKS if info.strip() == "tinygpt.py")
PLANS = [(info.split()[1], code) for info, code in BLOCKS if info.startswith("plan ")]


def test_the_tutorial_has_its_steps():
    assert BASE.startswith('"""TinyGPT') and "class TinyGPT" in BASE
    assert [v for v, _ in PLANS].count("EQUIVALENT") >= 6 and ("NOT-EQUIVALENT", PLANS[2][1]) \
        in PLANS


@pytest.mark.parametrize("k", range(len(PLANS)), ids=lambda k: f"step{k}-{PLANS[k][0]}")
def test_each_plan_of_the_tutorial_proves_as_documented(tmp_path, k):
    verdict, code = PLANS[k]
    path = tmp_path / "tinygpt.py"
    path.write_text(BASE + "\n\n" + code)
    r = prove(load(path), timeout_s=600)
    assert r.verdict == verdict.replace("-", " "), [(g.name, g.reason) for g in r.open_goals][:3]
    if verdict == "EQUIVALENT":
        assert r.counts["smt"] == 0            # by rewriting alone
    else:
        assert "1/|dp|" in r.counterexample.render()
