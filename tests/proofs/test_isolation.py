"""Plan isolation (issue 10, families 5 and 6): plan files run only in child interpreters.

``prove`` traces the plan in a clean child and gets back data; the checker re-traces in one; a
plan that monkeypatches the prover, the CLI or ``builtins`` when imported changes nothing in the
process that decides the verdict; a child that exits early, hangs or writes garbage is a
one-line error, never a verdict; ``prove`` re-checks its own certificate and exits with the
checker's code when the two disagree.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.cli import check_main, prove_main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py"
SRC = TINY.read_text()
WRONG = SRC.replace('all_reduce(g, DP, "sum")', 'all_reduce(g, DP, "avg")')  # grads 1/2 of spec

# Appended to a plan: what a hostile plan file does when it is imported (family 6).
HOSTILE = '''
import builtins as _b
import proofs.cli as _cli
import proofs.prover as _prover

_orig = _prover.prove


def _always_equivalent(problem, **kw):
    r = _orig(problem, **kw)
    r.verdict, r.counterexample = "EQUIVALENT", None
    return r


_prover.prove = _always_equivalent
_cli.EXIT["NOT EQUIVALENT"] = 0
_cli.EXIT["UNKNOWN"] = 0
print("the plan printed this")
_b.print = lambda *a, **k: None
_b.SHARDPROOF_VERDICT = "EQUIVALENT"
'''


def _write(tmp_path, text, name="plan.py"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _run(capsys, argv):
    code = prove_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_hostile_plan_would_win_in_process(tmp_path):
    """Control: loaded in the deciding process (the old way), the plan rebinds the prover and
    the exit codes, so a wrong plan would come out EQUIVALENT with exit 0."""
    p = _write(tmp_path, WRONG + HOSTILE)
    code = (
        "import sys, spec_lang, proofs.cli, proofs.prover\n"
        f"problem = spec_lang.load({str(p)!r})\n"
        "r = proofs.prover.prove(problem)\n"
        "sys.stderr.write(r.verdict + ' ' + str(proofs.cli.EXIT[r.verdict]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().endswith("EQUIVALENT 0")


def test_a_hostile_wrong_plan_is_not_equivalent(tmp_path, capsys):
    import builtins

    import proofs.prover

    before = proofs.prover.prove
    p = _write(tmp_path, WRONG + HOSTILE)
    cert = tmp_path / "c.json"
    code, out, err = _run(capsys, [p, "--certificate", cert])
    assert code == 1, out + err
    assert out.startswith(f"NOT EQUIVALENT: {p}")
    assert "check: certificate re-checked by check-certificate in a fresh process: verdict " \
           "NOT EQUIVALENT" in out
    assert "the plan printed this" in err          # its output, relayed; never on stdout
    # nothing of the plan ran here
    assert proofs.prover.prove is before and not hasattr(builtins, "SHARDPROOF_VERDICT")
    from proofs.cli import EXIT

    assert EXIT["NOT EQUIVALENT"] == 1
    assert json.loads(cert.read_text())["verdict"] == "NOT EQUIVALENT"


def test_a_hostile_correct_plan_is_still_proved(tmp_path, capsys):
    p = _write(tmp_path, SRC + HOSTILE)
    code, out, err = _run(capsys, [p, "--json"])
    assert code == 0, err
    v = json.loads(out)                           # the plan's print does not reach stdout
    assert v["verdict"] == "EQUIVALENT" and v["check"]["agrees"] and v["check"]["exit"] == 0
    assert v["check"]["answer"]["retraced"] is True


EXITS_EARLY = "import os\nos._exit(0)\n"
WRITES_GARBAGE = "import os, sys\nopen(sys.argv[-1], 'w').write('garbage')\nos._exit(0)\n"
WRITES_WRONG_FORMAT = ("import os, sys\nopen(sys.argv[-1], 'w').write('{\"problem\": {}}')\n"
                       "os._exit(0)\n")
WRITES_A_FLOAT = ("import os, sys\nopen(sys.argv[-1], 'w').write('{\"problem\": 0.5}')\n"
                  "os._exit(0)\n")
HANGS = "import time\ntime.sleep(600)\n"
KILLS_ITSELF = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"


@pytest.mark.parametrize("prefix,needle,limit", [
    (EXITS_EARLY, "exited with code 0 without a result", "600"),
    (WRITES_GARBAGE, "not JSON", "600"),
    (WRITES_WRONG_FORMAT, "traced data: top level", "600"),
    (WRITES_A_FLOAT, "not JSON", "600"),
    (HANGS, "did not finish within 3 s", "3"),
    (KILLS_ITSELF, "exited with code -9 without a result", "600"),
], ids=["exits-early", "garbage", "wrong-format", "float", "hangs", "killed"])
def test_a_misbehaving_tracer_is_bad_input_never_a_verdict(tmp_path, capsys, prefix, needle,
                                                            limit):
    p = _write(tmp_path, prefix + SRC)
    code, out, err = _run(capsys, [p, "--trace-timeout", limit])
    assert code == 3 and out == "", (out, err)
    assert err.startswith("prove: error: ") and err.count("\n") == 1, err
    assert needle in err, err


# -- the checker's re-trace ----------------------------------------------------------------------
def _prove_cert(tmp_path, capsys, text):
    p = _write(tmp_path, text)
    cert = tmp_path / "c.json"
    code, out, err = _run(capsys, [p, "--certificate", cert, "--no-check"])
    assert code == 0, err
    return p, cert


def test_a_certificate_without_its_plan_is_not_tied(tmp_path, capsys):
    p, cert = _prove_cert(tmp_path, capsys, SRC)
    p.unlink()
    assert check_main([str(cert)]) == 4
    err = capsys.readouterr().err
    assert "rejected: the certificate is not tied to a plan" in err and "--no-retrace" in err
    assert err.count("\n") == 1
    assert check_main([str(cert), "--no-retrace"]) == 0
    assert "plan not re-traced (--no-retrace): the goals are not tied to a plan file" in \
        capsys.readouterr().out
    assert check_main([str(cert), "--json"]) == 4
    answer = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert answer["valid"] is False and answer["exit"] == 4


# The plan behaves when proved and misbehaves when re-traced (a marker file switches it).
def _switch(behaviour: str, marker: Path) -> str:
    return (f"import os as _os\nif _os.path.exists({str(marker)!r}):\n"
            + "".join("    " + ln + "\n" for ln in behaviour.splitlines()))


@pytest.mark.parametrize("behaviour,needle,limit", [
    (HANGS, "did not finish within 3 s", "3"),
    (WRITES_GARBAGE, "not JSON", "600"),
    (EXITS_EARLY, "without a result", "600"),
    ("raise ValueError('boom')", "the plan no longer traces: ", "600"),
], ids=["hangs", "garbage", "exits-early", "raises"])
def test_a_misbehaving_retrace_rejects(tmp_path, capsys, behaviour, needle, limit):
    marker = tmp_path / "marker"
    p, cert = _prove_cert(tmp_path, capsys, _switch(behaviour, marker) + SRC)
    assert check_main([str(cert)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    marker.write_text("")
    assert check_main([str(cert), "--trace-timeout", limit]) == 4
    err = capsys.readouterr().err
    assert err.startswith("check-certificate: error: rejected: --retrace: ") and needle in err, err
    assert err.count("\n") == 1


def test_prove_exits_with_the_checkers_code_when_they_disagree(tmp_path, capsys):
    """A plan that traces to another program under the checker (its parent process is
    ``check-certificate``'s; the two traces run at the same time since prove starts its
    checker as it starts proving): prove proves its own trace, its own check re-traces the
    other and rejects; both verdicts are printed."""
    flip = ("_WRONG = b'\\0check\\0' in open(f'/proc/{__import__(\"os\").getppid()}/cmdline', "
            "'rb').read()\n")
    text = flip + SRC.replace('reduce_grads=lambda name, g: all_reduce(g, DP, "sum")',
                              'reduce_grads=lambda name, g: all_reduce(g, DP, '
                              '"avg" if _WRONG else "sum")')
    assert text != flip + SRC
    p = _write(tmp_path, text)
    code, out, err = _run(capsys, [p])
    assert code == 4, out + err
    assert out.startswith("EQUIVALENT: ")
    assert "check: DISAGREES: prove says EQUIVALENT; check-certificate rejects it (exit 4): " \
           "--retrace: goal" in out
    assert "prove: error: the independent checker disagrees: prove says EQUIVALENT" in err
    code, out, err = _run(capsys, [p, "--json"])     # a script reading "verdict" alone
    v = json.loads(out)
    assert code == 4 and v["verdict"] == "UNKNOWN" and v["prover_verdict"] == "EQUIVALENT"
    assert v["check"]["agrees"] is False and v["check"]["exit"] == 4, v["check"]
    code, out, err = _run(capsys, [p, "--no-check"])
    assert code == 0 and "check:" not in out


def test_no_check_and_the_temporary_certificate(tmp_path, capsys, monkeypatch):
    import tempfile

    code, out, err = _run(capsys, [TINY, "--no-check", "--json"])
    assert code == 0 and "check" not in json.loads(out)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    code, out, err = _run(capsys, [TINY, "--json"])
    v = json.loads(out)
    assert code == 0 and v["check"]["agrees"] and v["certificate"] is None
    assert v["check"]["answer"]["verdict"] == "EQUIVALENT"
    assert list(tmp.iterdir()) == []   # the temporary certificate and trace files are removed


def test_the_child_runs_exactly_the_hashed_bytes(tmp_path):
    """The tracer reads the parent's copy of the source, not the file again."""
    from proofs.isolation import trace_in_child

    p = _write(tmp_path, "raise SystemExit('the file on disk is not what was hashed')\n")
    pd, child = trace_in_child(p, SRC.encode())
    assert [g["name"] for g in pd.goals][:1] == ["loss"] and child.seconds["child"] > 0


def test_what_the_plan_leaves_running_is_killed(tmp_path, capsys, monkeypatch):
    """A plan that starts a background process: it dies with the tracing child's group. (It
    writes the pid to a file: SHARDPROOF_SANDBOX=off.)"""
    monkeypatch.setenv("SHARDPROOF_SANDBOX", "off")
    pidfile = tmp_path / "pid"
    prefix = ("import subprocess as _sp\n"
              f"_p = _sp.Popen(['sleep', '300'])\nopen({str(pidfile)!r}, 'w').write(str(_p.pid))\n")
    p = _write(tmp_path, prefix + SRC)
    code, out, err = _run(capsys, [p, "--no-check"])
    assert code == 0, err
    pid = int(pidfile.read_text())
    status = Path(f"/proc/{pid}/status")
    state = status.read_text().split("State:")[1].split()[0] if status.exists() else "gone"
    assert state in ("gone", "Z", "X"), state   # killed (a zombie until its new parent reaps it)


def test_a_plan_named_only_by_the_certificate_runs_only_nearby(tmp_path, capsys, monkeypatch):
    """A forged certificate naming some other Python file (whose hash it knows) does not make
    the checker run it: outside the working directory and the certificate's directory the
    user must name the plan with --plan."""
    plans, certs, elsewhere = (tmp_path / d for d in ("plans", "certs", "elsewhere"))
    for d in (plans, certs, elsewhere):
        d.mkdir()
    p = _write(plans, SRC)
    cert = certs / "c.json"
    monkeypatch.chdir(plans)
    assert prove_main([str(p), "--certificate", str(cert), "--no-check"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(elsewhere)
    assert check_main([str(cert)]) == 4
    err = capsys.readouterr().err
    assert "outside the working directory and the certificate's directory" in err and \
        "--plan" in err
    assert check_main([str(cert), "--plan", str(p)]) == 0
    monkeypatch.chdir(plans)
    assert check_main([str(cert)]) == 0


def test_check_flags(tmp_path, capsys):
    p, cert = _prove_cert(tmp_path, capsys, SRC)
    assert check_main([str(cert), "--plan", str(p), "--no-retrace"]) == 3
    assert "exclude each other" in capsys.readouterr().err
    assert check_main([str(cert), "--trace-timeout", "0"]) == 3
    assert check_main([str(cert), "--retrace", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["retraced"] is True
