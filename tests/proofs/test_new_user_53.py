"""New-user trial 53: the self-check line names its seconds (item A) and ``prove --torch``
says before tracing that a large two-axis mesh cannot be EQUIVALENT (item C)."""

from __future__ import annotations

import pytest

from proofs.isolation import CheckOutcome, TraceFailed
from proofs.mesh_note import untraced_note
from proofs.report_text import check_line


def test_the_check_line_says_what_its_seconds_are():
    """Before: ``plan re-traced (1.6 s)``, 1.6 s being prove's wait after the certificate while
    the re-trace itself had run for minutes alongside the proof."""
    ans = {"valid": True, "verdict": "EQUIVALENT", "proved": 85, "obligations": 85,
           "steps": 6389, "retraced": True}
    line = check_line("EQUIVALENT", CheckOutcome(0, ans, "", 1.6), True, 134.2)
    assert line == ("check: certificate re-checked by check-certificate in a fresh process: "
                    "verdict EQUIVALENT, 85 of 85 goals, 6389 steps, plan re-traced in that "
                    "process, alongside the proof (checker ran 134.2 s in all, 1.6 s after the "
                    "certificate was written)")
    no = check_line("EQUIVALENT", CheckOutcome(0, dict(ans, retraced=False), "", 0.5), True, 2.0)
    assert "plan not re-traced (checker ran 2.0 s in all, 0.5 s after" in no
    bad = check_line("EQUIVALENT", CheckOutcome(4, {"valid": False, "reason": "x\ny"}, "", 1.0),
                     False, 3.0)
    assert bad == ("check: DISAGREES: prove says EQUIVALENT; check-certificate rejects it "
                   "(exit 4): x y")


@pytest.mark.parametrize("src,want", [
    (b'import torch\nMESH = {"dp": 4, "tp": 4}\n', ("{'dp': 4, 'tp': 4} (train.py:2) has 16")),
    (b'MESH: dict = {"pp": 2, "dp": 2, "tp": 3}\n', "{'pp': 2, 'dp': 2, 'tp': 3} (train.py:1) "
                                                     "has 12"),
    (b'MESH = {"dp": 2, "tp": 4}\n', None),            # 8 ranks: every rank traced
    (b'MESH = {"dp": 16, "tp": 1}\n', None),           # one axis of size > 1
    (b'MESH = {"dp": 4, "tp": 4}\nMESH = {"dp": 2}\n', None),   # assigned twice: not guessed
    (b'N = 4\nMESH = {"dp": N, "tp": 4}\n', None),     # not a literal
    (b'MESH = {"dp": 4, "tp": 4\n', None),             # a syntax error: the trace reports it
])
def test_the_untraced_ranks_note(src, want):
    note = untraced_note(src, "/x/train.py")
    if want is None:
        assert note is None
        return
    assert note.startswith(f"prove: note: MESH {want} ranks and two or more axes of size > 1: "
                           "the ranks off its axes are not traced, so the verdict will not be "
                           "EQUIVALENT"), note
    assert note.endswith("declare a mesh of at most 8 ranks (e.g. {\"dp\": 2, \"tp\": 4}) or "
                         "one axis; docs/unknown.md#untraced-ranks")


def test_prove_prints_the_note_before_tracing(tmp_path, capsys, monkeypatch):
    """The note is on stderr when the trace starts (the trace is stopped here at once)."""
    import proofs.isolation
    from proofs.cli import prove_main

    p = tmp_path / "train.py"
    p.write_text('MESH = {"dp": 4, "tp": 4}\n')
    seen = []

    def trace_in_child(*a, **kw):
        seen.append(capsys.readouterr().err)
        raise TraceFailed("plan", "train.py:1: stopped by the test")

    monkeypatch.setattr(proofs.isolation, "trace_in_child", trace_in_child)
    assert prove_main(["--torch", str(p), "--no-check"]) == 3
    assert len(seen) == 1 and seen[0].startswith("prove: note: MESH {'dp': 4, 'tp': 4} "
                                                 "(train.py:1) has 16 ranks"), seen
    assert "stopped by the test" in capsys.readouterr().err
    p.write_text('MESH = {"dp": 2, "tp": 4}\n')
    assert prove_main(["--torch", str(p), "--no-check"]) == 3
    assert seen[1] == ""
