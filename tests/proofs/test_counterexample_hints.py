"""Factor hints: one axis per size, and an explicit "ambiguous" advice when several mesh axes
(or the micro-batch count K) share the factor's size (docs/cli.md, "Choose distinct sizes")."""

import json
from pathlib import Path

from proofs.cli import prove_main
from proofs.counterexample import explain_ratio

TINY = Path(__file__).resolve().parent / "plans" / "tiny_dp_tp.py"
AMBIG = "(ambiguous: give the mesh axes and the micro-batch count distinct sizes, e.g. dp=2, tp=4"


def test_same_sizes_are_flagged_ambiguous_distinct_sizes_are_not():
    h = explain_ratio(2.0, {"dp": 2, "tp": 2, "mb": 2})
    assert h.startswith("2 = |dp|") and "2 = |tp|" in h and "K=2 micro-batches" in h
    assert h.endswith(AMBIG + ", to tell them apart)")
    h = explain_ratio(0.5, {"dp": 2, "tp": 4, "mb": 3})
    assert h == "1/2 = 1/|dp|: a sum over dp is missing or averaged"
    assert explain_ratio(4.0, {"dp": 2, "tp": 4, "mb": 3}).startswith("4 = |tp|")
    assert "ambiguous" not in explain_ratio(6.0, {"dp": 2, "tp": 4, "mb": 3})   # |dp| * K
    assert explain_ratio(1.0 / 3, {"dp": 2, "tp": 4, "mb": 3}).startswith("1/K for K=3")


def test_cli_counterexample_carries_the_advice_only_when_ambiguous(tmp_path, capsys):
    src = TINY.read_text().replace('all_reduce(g, DP, "sum")', 'all_reduce(g, DP, "avg")')
    for mesh, ambiguous in (("Mesh(dp=2, tp=2)", True), ("Mesh(dp=2, tp=4)", False)):
        p = tmp_path / "plan.py"
        p.write_text(src.replace("Mesh(dp=2, tp=2)", mesh))
        assert prove_main([str(p), "--json"]) == 1
        cx = json.loads(capsys.readouterr().out)["counterexample"]
        assert cx["ratio"] == "0.5" and "1/2 = 1/|dp|" in cx["explanation"]
        assert (AMBIG in cx["explanation"]) is ambiguous, cx["explanation"]
        assert ("1/|tp|" in cx["explanation"]) is ambiguous
