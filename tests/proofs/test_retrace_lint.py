"""The checker's re-trace child leaves the DSL's partial-sum lint out and ends without the
interpreter's teardown (issue 14: both were on ``check-certificate``'s critical path, about a
sixth of DeepSeek-V3's trace CPU and 0.6-1.5 s of teardown). The traced problem is the same
bytes either way; ``prove``'s own trace keeps the lint's warnings for the user."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import proofs.retrace as retrace
from proofs.isolation import _command, start_trace
from proofs.kernel import node_hash_table

ROOT = Path(__file__).resolve().parents[2]
B26 = ROOT / "examples" / "bugs" / "B26_buggy.py"       # a scalar added to a Partial: linted
LINTED = "added |dp| times"


def _trace(path: Path, source: bytes, lint: bool):
    pending = start_trace(str(path), source, frontend="dsl", timeout_s=300, lint=lint)
    return pending.result(), pending.stderr


def test_the_lint_is_left_out_and_the_problem_is_the_same():
    src = B26.read_bytes()
    with_lint, err_on = _trace(B26, src, True)
    without, err_off = _trace(B26, src, False)
    assert LINTED in err_on and "PartialSumWarning" in err_on, err_on[-500:]
    assert LINTED not in err_off and "PartialSumWarning" not in err_off, err_off[-500:]
    assert node_hash_table(with_lint.table) == node_hash_table(without.table)
    rest = [{k: v for k, v in vars(pd).items() if k not in ("table", "seconds")}
            for pd in (with_lint, without)]
    assert rest[0] == rest[1] and rest[0]["goals"]


def test_the_checkers_retrace_asks_for_no_lint(monkeypatch):
    seen = {}

    def fake_start(*a, **k):
        seen.update(k)
        raise retrace.TraceFailed("child", "stopped here")

    monkeypatch.setattr(retrace, "start_trace", fake_start)
    with pytest.raises(retrace.CertificateError, match="stopped here"):
        retrace._start("plan.py", b"", "dsl", 10.0)
    assert seen["lint"] is False


def test_the_child_ends_without_the_plans_exit_handlers(tmp_path):
    src = B26.read_bytes() + (b"\nimport atexit as _ax, sys as _s\n"
                              b"_ax.register(lambda: _s.stderr.write('EXIT HANDLER RAN\\n'))\n"
                              b"_s.stderr.write('PLAN IMPORTED\\n')\n")
    pd, err = _trace(tmp_path / "plan.py", src, False)
    assert [g["name"] for g in pd.goals][:1] == ["loss"]
    assert "PLAN IMPORTED" in err and "EXIT HANDLER RAN" not in err, err[-500:]


@pytest.mark.parametrize("args", [["trace", "dsl", "--no-lint"], ["retrace", "dsl", "x"],
                                  ["retrace-dsl"], ["retrace", "coq"]])
def test_other_child_arguments_are_refused(tmp_path, args):
    src = tmp_path / "source"
    src.write_bytes(B26.read_bytes())
    r = subprocess.run(_command(*args, str(B26), str(src), str(tmp_path / "out.json")),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3 and "bad arguments" in r.stderr, (r.returncode, r.stderr[-300:])
    assert not (tmp_path / "out.json").exists()
