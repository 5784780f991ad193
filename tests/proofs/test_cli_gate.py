"""The CLI as a CI gate (issue 12, item 6): check-certificate's exit codes, ``--version`` on
every console script, the certificate path checked before proving, one word ("goals") for the
user-facing count, ``shardproof --help``, and progress lines that agree with the table."""

import errno
import io
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from proofs.cli import CHECK_EXIT, check_main, prove_main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "proofs" / "plans" / "tiny_dp_tp.py"
SRC = TINY.read_text()
BUGGY = SRC.replace('all_reduce(g, DP, "sum")', 'all_reduce(g, DP, "avg")')
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _run(capsys, argv):
    code = prove_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """Three verified certificates: EQUIVALENT, NOT EQUIVALENT and UNKNOWN (every goal open:
    a budget that has already run out), each beside its plan."""
    d = tmp_path_factory.mktemp("gate")
    (d / "ok.py").write_text(SRC)
    (d / "bad.py").write_text(BUGGY)
    (d / "open.py").write_text(SRC)
    for name, extra, want in [("ok", [], 0), ("bad", [], 1),
                              ("open", ["--timeout", "1e-9"], 2)]:
        code = prove_main([str(d / f"{name}.py"), "--certificate", str(d / f"{name}.json"),
                           "--no-check", "--json", *extra])
        assert code == want, name
    return d


# -- 1. exit codes ------------------------------------------------------------------------------
def test_check_certificate_exit_code_is_the_verified_verdicts(certs, capsys):
    capsys.readouterr()
    for name, verdict, code in [("ok", "EQUIVALENT", 0), ("bad", "NOT EQUIVALENT", 1),
                                ("open", "UNKNOWN", 2)]:
        assert check_main([str(certs / f"{name}.json"), "--json"]) == code, name
        answer = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert answer["valid"] is True and answer["verdict"] == verdict, answer
        assert answer["exit"] == code and answer["obligations"] == 5
        assert check_main([str(certs / f"{name}.json")]) == code
        out = capsys.readouterr().out
        assert out.startswith(f"certificate OK: verdict {verdict};"), out
    assert "exit 2: goals are open (--accept-unknown accepts them)" in out
    assert CHECK_EXIT == {"EQUIVALENT": 0, "NOT EQUIVALENT": 1, "UNKNOWN": 2, "bad input": 3,
                          "rejected": 4}


def test_accept_unknown_makes_a_verified_unknown_pass_and_says_so(certs, capsys):
    capsys.readouterr()
    assert check_main([str(certs / "open.json"), "--accept-unknown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("certificate OK: verdict UNKNOWN; 0 of 5 goals") and \
        out.rstrip().endswith("open goals accepted (--accept-unknown): exit 0"), out
    assert check_main([str(certs / "open.json"), "--accept-unknown", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exit"] == 0
    # it accepts open goals, nothing else: NOT EQUIVALENT still exits 1
    assert check_main([str(certs / "bad.json"), "--accept-unknown"]) == 1


def test_a_rejected_certificate_exits_4_and_malformed_input_3(certs, tmp_path, capsys):
    cert = json.loads((certs / "ok.json").read_text())
    cert["verdict"] = "NOT EQUIVALENT"          # a forged verdict: does not check
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(cert))
    capsys.readouterr()
    assert check_main([str(forged), "--no-retrace", "--json"]) == 4
    out, err = capsys.readouterr()
    answer = json.loads(out)
    assert answer["valid"] is False and answer["exit"] == 4 and answer["reason"], answer
    assert err.startswith("check-certificate: error: rejected: ") and err.count("\n") == 1
    # not tied to a plan (its plan file is gone) is a rejection too
    alone = tmp_path / "alone.json"
    alone.write_text((certs / "ok.json").read_text())
    assert check_main([str(alone)]) == 4
    assert "not tied to a plan" in capsys.readouterr().err
    # a --plan the user mistyped is bad input (new-user trial, stop 51), not a rejection
    assert check_main([str(alone), "--plan", str(tmp_path / "typo.py")]) == 3
    err = capsys.readouterr().err
    assert err == f"check-certificate: error: --plan {tmp_path / 'typo.py'}: not a file\n"
    (tmp_path / "garbage.json").write_text("{not json")
    assert check_main([str(tmp_path / "garbage.json")]) == 3


def test_prove_self_check_agrees_with_a_verified_not_equivalent(tmp_path, capsys):
    p = tmp_path / "bad.py"
    p.write_text(BUGGY)
    code, out, err = _run(capsys, [p, "--json"])
    v = json.loads(out)
    assert code == 1 and v["verdict"] == "NOT EQUIVALENT", err
    assert v["check"]["agrees"] is True and v["check"]["exit"] == 1, v["check"]
    assert "disagrees" not in err


# -- 2. --version -------------------------------------------------------------------------------
@pytest.mark.parametrize("script", sorted(PYPROJECT["project"]["scripts"]))
def test_every_console_script_prints_its_version(script):
    module, func = PYPROJECT["project"]["scripts"][script].split(":")
    r = subprocess.run([sys.executable, "-c", f"import sys; from {module} import {func}; "
                        f"sys.exit({func}(['--version']))"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{script} {PYPROJECT['project']['version']}\n", r.stdout


# -- 3. the certificate path --------------------------------------------------------------------
@pytest.mark.parametrize("target,needle", [
    ("", "--certificate: empty path"),
    ("DIR", "is a directory"),
    ("DIR/missing/c.json", "does not exist"),
    ("/proc/shardproof-c.json", "cannot write in /proc"),
    ("/dev/null", "not a regular file"),
], ids=["empty", "directory", "missing-dir", "unwritable", "device"])
def test_an_unusable_certificate_path_is_bad_input_before_proving(tmp_path, capsys, target,
                                                                  needle):
    code, out, err = _run(capsys, [TINY, "--certificate", target.replace("DIR", str(tmp_path))])
    assert code == 3 and out == "", out
    # one line and nothing else: the plan was not traced (no progress lines)
    assert err.startswith("prove: error: ") and err.count("\n") == 1 and needle in err, err


def test_a_failed_write_after_proving_prints_the_verdict_first(tmp_path, capsys, monkeypatch):
    import proofs.certificate

    def full_disk(path, cert):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(proofs.certificate, "write_certificate", full_disk)
    code, out, err = _run(capsys, [TINY, "--certificate", tmp_path / "c.json"])
    assert code == 3
    assert out.startswith(f"EQUIVALENT: {TINY}") and "certificate:" not in out, out
    assert "check:" not in out                 # nothing was written, so nothing is checked
    last = err.splitlines()[-1]
    assert last.startswith(f"prove: error: {tmp_path / 'c.json'}: cannot write the certificate: "
                           "No space left on device"), err
    assert not (tmp_path / "c.json").exists()


def test_prove_of_a_directory_says_so(tmp_path, capsys):
    code, out, err = _run(capsys, [tmp_path])
    assert code == 3 and out == ""
    assert err == f"prove: error: {tmp_path}: is a directory; give the plan file (a .py file " \
                  "defining spec and plan)\n"


# -- 4. one word for the count ------------------------------------------------------------------
def test_user_facing_texts_say_goals_never_obligations(certs, tmp_path, capsys):
    texts = []
    for argv in (["--help"], [str(certs / "ok.py")], [str(certs / "bad.py")]):
        code, out, err = _run(capsys, argv)
        texts.append(out + err)
    assert "goals" in texts[1] and "of 5 goals" in texts[1]   # the self-check's line
    assert check_main(["--help"]) == 0
    texts.append(capsys.readouterr().out)
    for name in ("ok", "bad", "open"):
        check_main([str(certs / f"{name}.json")])
        check_main([str(certs / f"{name}.json"), "--no-retrace"])
        texts.append("".join(capsys.readouterr()))
    cert = json.loads((certs / "ok.json").read_text())
    cert["verdict"] = "UNKNOWN"
    (tmp_path / "f.json").write_text(json.dumps(cert))
    assert check_main([str(tmp_path / "f.json"), "--no-retrace"]) == 4
    texts.append(capsys.readouterr().err)
    assert "every goal is proved" in texts[-1]
    for t in texts:
        assert "obligation" not in t.lower(), t


# -- 5. shardproof --help -----------------------------------------------------------------------
def test_shardproof_help_lists_exactly_its_subcommands():
    import argparse

    from simulator.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    real = set(sub.choices)
    assert {"simulate", "train", "calibrate"} <= real
    text = parser.format_help()
    listed = re.search(r"^commands: (.*)$", text, re.M)
    assert listed is not None, text
    assert set(listed.group(1).split(", ")) == real
    section = text.split("positional arguments:", 1)[1].split("options:", 1)[0]
    shown = set(re.findall(r"^    (\w[\w-]*)", section, re.M))
    assert shown == real, (shown, real)
    # proving is a separate command, not a subcommand it would pretend to have
    assert "prove PLAN.py" in text and "prove" not in real


# -- 6. progress and the summary table ----------------------------------------------------------
def test_progress_reports_every_phase_in_the_tables_seconds():
    from proofs.progress import REPORT_S, Progress

    out = io.StringIO()
    with Progress(stream=out) as p:
        p("rewrite", 0, 3)
        p("rewrite", 3, 3)
        p.finished("rewrite", 0.25, "lemmas")
        p.finished("verdict", REPORT_S + 0.5)   # no counts, longer than REPORT_S: reported
        p.finished("reuse", 0.01)               # no counts, short: quiet
        p("rewrite", 1, 1)                      # the same phase again: its total so far
        p.finished("rewrite", 0.5, "goals")
        p.finished("rewrite", 0.35)             # no counts, but it changes a shown total
        p.finished("rewrite", 0.01)             # ... and this does not
        p.finished("smt", 0.6)
        p.finished("smt", 0.6)                  # short runs adding up to a second or more
        p.begin("check")
        p.finished("check", 2.0)
    assert out.getvalue().splitlines() == [
        "prove: rewrite: 3/3 lemmas, 0.2 s", f"prove: verdict: {REPORT_S + 0.5:.1f} s",
        "prove: rewrite: 1/1 goals, 0.8 s", "prove: rewrite: 1.1 s", "prove: smt: 1.2 s",
        "prove: check: 2.0 s"]
    quiet = io.StringIO()
    with Progress(enabled=False, stream=quiet) as p:
        p("rewrite", 1, 1)
        p.finished("rewrite", 5.0)
    assert quiet.getvalue() == ""


def test_progress_lines_agree_with_the_summary_table(capsys):
    code, out, err = _run(capsys, [TINY])
    assert code == 0, err
    lines = re.findall(r"^prove: (\w+): (?:(\d+)/(\d+) (\w+), )?([\d.]+) s$", err, re.M)
    assert lines and lines[0][0] == "trace", err
    rows = out.splitlines()
    head = next(i for i, r in enumerate(rows) if r.split()[:2] == ["trace", "s"])
    names = [h for h in rows[head].split() if h != "s"]
    table = dict(zip(names, (float(v) for v in rows[head + 1].split())))
    last = {}
    for phase, _, _, unit, secs in lines:
        last[phase] = float(secs)
        assert phase in table, (phase, table)
        assert unit in ("", "plan", "goals", "lemmas")
    for phase, secs in last.items():   # the last line of a phase shows the table's value
        assert secs == pytest.approx(table[phase], abs=0.051), (phase, secs, table)
    for phase, secs in table.items():  # every phase of a second or more is reported
        if phase != "total" and secs >= 1.0:
            assert phase in last, (phase, err)
    assert {"trace", "rewrite"} <= set(last)
