"""``prove`` and ``check-certificate``: exit codes, stdout/stderr texts, bad inputs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.cli import check_main, prove_main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py"
SRC = TINY.read_text()


def _plan(tmp_path, text, name="plan.py"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _run(capsys, argv):
    code = prove_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_equivalent_plan_exits_0_and_writes_a_checkable_certificate(tmp_path, capsys):
    cert = tmp_path / "out.json"
    code, out, err = _run(capsys, [TINY, "--certificate", cert])
    assert code == 0, err
    assert out.startswith("EQUIVALENT: ") and "goals" in out and "rewriting" in out
    assert check_main([str(cert), "--retrace"]) == 0
    assert capsys.readouterr().out.startswith("certificate OK: verdict EQUIVALENT")


def test_json_verdict(tmp_path, capsys):
    code, out, err = _run(capsys, [TINY, "--json", "--jobs", "2"])
    assert code == 0
    v = json.loads(out)
    assert v["verdict"] == "EQUIVALENT" and v["counts"]["total"] == 5 and v["open"] == []
    assert set(v["seconds"]) >= {"rewrite", "smt"} and {"cut", "refute"} & set(v["seconds"])


def test_bug_exits_1_with_the_counterexample(tmp_path, capsys):
    bad = _plan(tmp_path, SRC.replace('all_reduce(g, DP, "sum")', 'all_reduce(g, DP, "avg")'))
    code, out, err = _run(capsys, [bad, "--json"])
    assert code == 1
    cx = json.loads(out)["counterexample"]
    assert cx["goal"].startswith("grad:") and "1/|dp|" in cx["explanation"]
    assert cx["site"].startswith(str(bad))


def test_refuted_plan_table_says_goals_were_not_attempted(tmp_path, capsys):
    bad = _plan(tmp_path, SRC.replace('all_reduce(g, DP, "sum")', 'all_reduce(g, DP, "avg")'))
    code, out, err = _run(capsys, [bad])
    assert code == 1
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("goals  "))
    cols = lines[head].split("  ")
    cols = [c.strip() for c in cols if c.strip()]
    assert cols == ["goals", "rewriting", "z3", "reused", "open", "not attempted", "refuted"]
    vals = dict(zip(cols, map(int, lines[head + 1].split())))
    assert vals["open"] == 0 and vals["not attempted"] >= 1
    assert vals["not attempted"] + vals["refuted"] == vals["goals"]
    n = vals["not attempted"]
    assert f"not attempted: {n} goal{'s' if n > 1 else ''}: the plan is already refuted" in out
    # an EQUIVALENT run keeps the old columns
    code, out, err = _run(capsys, [TINY])
    assert code == 0 and "not attempted" not in out


def test_retrace_rejects_a_changed_plan(tmp_path, capsys):
    plan = _plan(tmp_path, SRC)
    cert = tmp_path / "c.json"
    assert _run(capsys, [plan, "--certificate", cert])[0] == 0
    plan.write_text(SRC.replace("SGD()", "SGD(lr=1)"))
    assert check_main([str(cert), "--retrace"]) == 4
    assert "plan file changed" in capsys.readouterr().err
    # re-tracing is the default, so no flag is needed
    assert check_main([str(cert)]) == 4
    assert "plan file changed" in capsys.readouterr().err
    assert check_main([str(cert), "--no-retrace"]) == 0
    assert "plan not re-traced" in capsys.readouterr().out


BAD_INPUTS = [
    ("syntax error", "def f(:\n", r"plan.py:1: syntax error"),
    ("no spec", "x = 1\n", "plan.py:1: the plan file must define `spec"),
    ("no plan", SRC.split("\ndef forward")[0] + "\n", "must define `plan"),
    ("placement does not divide", SRC.replace('Dim("F", 8)', 'Dim("F", 6)').replace(
        "Mesh(dp=2, tp=2)", "Mesh(dp=2, tp=4)"), "does not divide"),
    ("axis not in the mesh", SRC.replace('"x": {DP: Shard(B)}', '"x": {Axis.CP: Shard(B)}'),
     "cp"),
    ("shape mismatch", SRC.replace('data={"x": real(B, H)}', 'data={"x": real(B, Dim("H", 5))}'),
     "plan.py:"),
    ("unsupported op on a gradient path", SRC.replace("ops.silu(", "ops.maximum(0, "),
     "plan.py:"),
    ("exception in the plan file", SRC.replace("DP, TP = Axis.DP, Axis.TP", "DP, TP = Axis.DP, TPP"),
     "NameError"),
    ("Axis member typo", SRC.replace("DP, TP = Axis.DP, Axis.TP", "DP, TP = Axis.DP, Axis.TPP"),
     "unknown axis Axis.TPP; valid axes: DP ('dp'), TP ('tp'), PP ('pp')"),
    ("inexact float constant", SRC.replace("/ ops.dim_size(B)", "* (0.1 + 0.2)"), "plan.py:"),
]


@pytest.mark.parametrize("what,text,needle", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_exits_3_with_one_line(tmp_path, capsys, what, text, needle):
    p = _plan(tmp_path, text)
    code, out, err = _run(capsys, [p])
    assert code == 3, (what, out, err)
    assert out == ""
    assert err.startswith("prove: error: ") and err.count("\n") == 1, err
    assert needle in err, err
    assert "Traceback" not in err


def test_axis_typo_names_the_line_and_keeps_hasattr(tmp_path, capsys):
    from spec_lang import Axis
    from spec_lang.errors import PlanError
    line = SRC.splitlines().index("DP, TP = Axis.DP, Axis.TP") + 1
    p = _plan(tmp_path, SRC.replace("DP, TP = Axis.DP, Axis.TP", "DP, TP = Axis.DP, Axis.TPP"))
    code, out, err = _run(capsys, [p])
    assert code == 3 and err.startswith(f"prove: error: {p}:{line}: unknown axis Axis.TPP"), err
    assert "DP_SHARD ('dp_shard')" in err
    # still an AttributeError for hasattr / getattr-with-default; members unchanged
    assert not hasattr(Axis, "TPP") and getattr(Axis, "XX", None) is None
    with pytest.raises(PlanError):
        Axis.TPP  # noqa: B018
    assert Axis.TP == "tp" and Axis("pp") is Axis.PP and len(list(Axis)) == 9


def test_missing_file_and_bad_flags(tmp_path, capsys):
    code, out, err = _run(capsys, [tmp_path / "nope.py"])
    assert (code, out) == (3, "") and err == f"prove: error: {tmp_path / 'nope.py'}: no such file\n"
    code, out, err = _run(capsys, [TINY, "--jobs", "0"])
    assert code == 3 and "--jobs must be >= 1" in err
    code, out, err = _run(capsys, [TINY, "--executor", "slurm"])
    assert code == 3 and err.splitlines()[-1].startswith("prove: error: ")
    code, out, err = _run(capsys, [TINY, "--worker-memory", "0"])
    assert code == 3 and "--worker-memory must be > 0" in err
    code, out, err = _run(capsys, [TINY, "--certificate", tmp_path / "no" / "dir.json"])
    assert code == 3 and "does not exist" in err


def test_internal_error_is_unknown_never_equivalent(capsys, monkeypatch):
    import proofs.prover

    def boom(*a, **k):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(proofs.prover, "prove", boom)
    code, out, err = _run(capsys, [TINY])
    assert code == 2
    # after the progress lines of the phases that ran (trace, load), one line
    *progress, last = err.splitlines()
    assert last.startswith("prove: internal error: RuntimeError: kaboom"), err
    assert all(x.startswith(("prove: trace: ", "prove: load: ")) for x in progress), err


def test_console_scripts_in_a_subprocess(tmp_path):
    cert = tmp_path / "c.json"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", "from proofs.cli import prove_main; prove_main()",
                        str(TINY), "--certificate", str(cert)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("EQUIVALENT")
    r = subprocess.run([sys.executable, "-c", "from proofs.cli import check_main; check_main()",
                        str(cert)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("certificate OK")


DEBUG_LLAMA = ROOT / "tests" / "spec_lang" / "plans" / "debug_tp_dp.py"


@pytest.mark.skipif(not DEBUG_LLAMA.exists(), reason="the DSL's debug Llama plan is missing")
def test_debug_llama_tp_dp_mb_end_to_end(tmp_path, capsys):
    cert = tmp_path / "llama.json"
    code, out, err = _run(capsys, [DEBUG_LLAMA, "--certificate", cert, "--json"])
    assert code == 0, out + err
    counts = json.loads(out)["counts"]
    # layer 1's goals reuse layer 0's lemmas (obligation cutting, proofs/cut.py)
    assert counts["rewrite"] + counts["reused"] == counts["total"] and counts["reused"] > 0
    assert json.loads(out)["obligations"]["reused"] > 0
    assert check_main([str(cert), "--retrace"]) == 0
    assert capsys.readouterr().out.startswith("certificate OK")
    # the same plan averaging gradients over dp instead of summing them: the first divergence
    # is the last layer's output gradient, at half the spec
    bad = _plan(tmp_path, DEBUG_LLAMA.read_text().replace(
        'reduce_grads=lambda name, g: all_reduce(g, DP, "sum")',
        'reduce_grads=lambda name, g: all_reduce(g, DP, "avg")'), "bad_llama.py")
    code, out, err = _run(capsys, [bad, "--json"])
    assert code == 1
    cx = json.loads(out)["counterexample"]
    assert cx["goal"] == "grad:output" and cx["explanation"].startswith("= 0.500 x spec")
    assert "1/|dp|" in cx["explanation"]


def test_a_closed_output_pipe_keeps_the_verdicts_exit_code(tmp_path):
    # `prove plan.py --json | head -c 10`: the reader leaves early; EQUIVALENT must still exit 0
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-c", "from proofs.cli import prove_main; prove_main()",
                             str(TINY), "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)
    proc.stdout.close()  # before prove writes anything: its first write hits a closed pipe
    assert proc.wait(timeout=120) == 0
