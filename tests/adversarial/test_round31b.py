"""Adversarial round 31b (``tests/adversarial/ATTEMPTS.md``, "Round 31b"), against wip/adv31b at
80e173c (= main): the early self-check (``prove`` starts ``check-certificate --await-certificate``
as proving starts; proofs/isolation.py ``start_check``, proofs/retrace.py ``EarlyRetrace``),
fewer GC passes, and the kernel's exact hash-consing keys (``_exact_key``). Plans and drivers in
``plans/round31b/``.

No false accept and no way found for plan code to decide the verdict: the early trace is adopted
only for the bytes that hash to the certificate's ``plan.sha256``, under its path and front end
(a plan file swapped after the early trace, with a certificate forged to name the new bytes, is
re-traced and rejected); a plan tracing differently in the checker is a disagreement (exit 4).

* R31b-1 (orphan; ``r31b_03``): ``prove``'s forked z3 pool (proofs/smt_fallback.py,
  ``ProcessPoolExecutor`` with the default ``fork`` start method) inherits the write end of the
  checker's stdin pipe; when ``prove`` is SIGKILLed meanwhile, the checker never reads end of
  input and waits (``select`` without a timeout) as long as the orphaned pool workers live:
  forever.
* R31b-2 (minor): ``check-certificate --await-certificate`` with stdin closed crashes
  (``sys.stdin`` is None: AttributeError traceback) with exit 1, the code of a verified
  NOT EQUIVALENT.
* R31b-3 (minor, older than the early check): ``prove --certificate=-c.json``: the checker's
  command line takes the certificate for an option; the check fails, exit 3 (disagreement).
* R31b-4 (minor, older): ``prove PLAN --certificate PLAN`` writes the certificate over the plan
  file (the user's source is lost), then reports a disagreement.
All six fixed in stop 31 (asserted): R31b-1 the z3 pool spawned (proofs/smt_fallback.py) and
the waiting checker ends when its parent does (``EarlyRetrace.wait``); R31b-2 no stdin is no
signal (exit 2); R31b-3 the checker is given the certificate's absolute path; R31b-4
``unwritable`` refuses the plan file (exit 3); R31b-5 ``decode_attr`` takes only canonical sets
(members sorted by their canonical JSON, distinct, as many as the Python set has); R31b-6
``prove`` says it cannot start the self-check (exit 3).

* R31b-5 (minor): ``decode_attr`` takes non-canonical sets: ``{"set": [1, true]}`` is
  ``frozenset({1})``, ``{"set": [true, 1]}`` is ``frozenset({True})`` (the first member wins),
  unsorted or repeated members are accepted; no false accept found (hashes use the re-encoding,
  rules compare attributes exactly).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUND31B = Path(__file__).resolve().parent / "plans" / "round31b"
EXAMPLES = ROOT / "examples"


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _cli(*args: str, stdin=None, cwd: Path | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proofs.cli", *args], cwd=cwd or ROOT,
                          env=_env(), stdin=stdin, capture_output=True, timeout=timeout)


def _prove_json(plan: Path, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    r = _cli("prove", str(plan), "--certificate", str(tmp_path / "c.json"), "--json",
             "--timeout", "60", *extra)
    return r.returncode, json.loads(r.stdout)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# -- the early self-check: right today -----------------------------------------------------------
def test_r31b_plan_tracing_differently_in_the_checker_is_a_disagreement(tmp_path):
    rc, out = _prove_json(ROUND31B / "r31b_01_differs_in_checker.py", tmp_path)
    assert rc == 4
    assert out["verdict"] == "UNKNOWN" and out["prover_verdict"] == "EQUIVALENT"
    assert out["check"]["agrees"] is False and out["check"]["exit"] == 4


def test_r31b_plan_sigterm_to_its_checker_is_no_verdict(tmp_path):
    rc, out = _prove_json(ROUND31B / "r31b_02_sigterm_checker.py", tmp_path)
    assert rc == 2
    assert out["verdict"] == "UNKNOWN" and out["check"]["agrees"] is False


def _await_check(cert: Path, plan: Path, swap_to: Path) -> subprocess.CompletedProcess:
    """check-certificate --await-certificate: early-trace ``plan``, then rename ``swap_to`` over
    it, then say 'certificate written'."""
    p = subprocess.Popen([sys.executable, "-m", "proofs.cli", "check", str(cert), "--plan",
                          str(plan), "--json", "--await-certificate", f"dsl:{plan}"],
                         cwd=ROOT, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    time.sleep(6)                                   # the early trace has run
    tmp = plan.with_suffix(".tmp")
    shutil.copy(swap_to, tmp)
    os.replace(tmp, plan)
    out, err = p.communicate(b"certificate written\n", timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@pytest.mark.slow   # ~18 s; test_early_check.py's changed-plan test is the fast instance
def test_r31b_early_trace_is_not_adopted_for_swapped_bytes_with_a_forged_hash(tmp_path):
    """The early trace ran on B01_fixed; the file is then B01_buggy and the certificate (the
    fixed plan's, EQUIVALENT) is forged to name the buggy bytes' hash: re-traced, rejected."""
    plan = tmp_path / "plan.py"
    shutil.copy(EXAMPLES / "bugs" / "B01_fixed.py", plan)
    r = _cli("prove", str(plan), "--certificate", str(tmp_path / "a.json"), "--json")
    assert r.returncode == 0
    c = json.loads((tmp_path / "a.json").read_text())
    c["plan"]["sha256"] = hashlib.sha256(
        (EXAMPLES / "bugs" / "B01_buggy.py").read_bytes()).hexdigest()
    (tmp_path / "forged.json").write_text(json.dumps(c))
    shutil.copy(EXAMPLES / "bugs" / "B01_fixed.py", plan)
    r = _await_check(tmp_path / "forged.json", plan, EXAMPLES / "bugs" / "B01_buggy.py")
    assert r.returncode == 4, r.stderr.decode()[-500:]
    assert "is not the plan's" in json.loads(r.stdout)["reason"]
    # control: the same bytes swapped back in: the early trace is adopted and accepts
    shutil.copy(EXAMPLES / "bugs" / "B01_fixed.py", plan)
    r = _await_check(tmp_path / "a.json", plan, EXAMPLES / "bugs" / "B01_fixed.py")
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "EQUIVALENT"


# -- findings ---------------------------------------------------------------------------------------
def test_r31b_1_checker_ends_when_prove_is_killed_during_the_z3_pool(tmp_path):
    plan = tmp_path / "p.py"
    shutil.copy(EXAMPLES / "llama_debug_dp.py", plan)
    log = tmp_path / "driver.log"     # a file, not a pipe: the orphaned pool would hold a pipe
    with open(log, "wb") as f:
        rc = subprocess.run([sys.executable,
                             str(ROUND31B / "r31b_03_fork_pool_holds_checker_stdin.py"),
                             str(plan), str(tmp_path / "c.json"), "30"], cwd=tmp_path, env=_env(),
                            stdin=subprocess.DEVNULL, stdout=f, stderr=f, timeout=120).returncode
    words = log.read_text().split()
    assert rc == -signal.SIGKILL, words
    checker = int(words[words.index("checker") + 1])
    pool = [int(w) for w in words[words.index("pool") + 1:]]
    try:
        deadline = time.monotonic() + 10
        while _alive(checker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(checker), "the checker outlived prove by 10 s"
    finally:
        for pid in (checker, *pool):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_r31b_2_await_certificate_with_stdin_closed_is_no_verdict(tmp_path):
    plan = tmp_path / "p.py"
    shutil.copy(EXAMPLES / "llama_debug_dp.py", plan)
    r = subprocess.run([sys.executable, "-c",
                        "import os, sys; os.close(0); from proofs.cli import check_main; "
                        "sys.argv[0] = 'check-certificate'; check_main()",
                        str(tmp_path / "c.json"), "--plan", str(plan), "--json",
                        "--await-certificate", f"dsl:{plan}"], cwd=ROOT, env=_env(),
                       capture_output=True, timeout=60)
    assert r.returncode in (2, 3), (r.returncode, r.stderr.decode()[-300:])
    assert b"Traceback" not in r.stderr


def test_r31b_3_certificate_path_starting_with_a_dash(tmp_path):
    plan = tmp_path / "p.py"
    shutil.copy(EXAMPLES / "llama_debug_dp.py", plan)
    r = _cli("prove", str(plan), "--certificate=-c.json", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()[-300:]
    assert json.loads(r.stdout)["check"]["agrees"] is True


def test_r31b_4_certificate_over_the_plan_file_is_refused(tmp_path):
    plan = tmp_path / "p.py"
    shutil.copy(EXAMPLES / "llama_debug_dp.py", plan)
    before = plan.read_bytes()
    r = _cli("prove", str(plan), "--certificate", str(plan), "--json")
    assert plan.read_bytes() == before
    assert r.returncode == 3


@pytest.mark.parametrize("members", [[1, True], [True, 1], [2, 1], [1, 1]])
def test_r31b_5_non_canonical_set_attribute_is_malformed(members):
    from proofs.kernel import KernelMalformed, decode_attr

    with pytest.raises(KernelMalformed):
        decode_attr({"set": members})


def test_r31b_exact_keys_keep_true_and_one_apart_in_sets():
    from proofs.kernel import NodeTable, node_hash_table

    t = NodeTable()
    a = t.add("CONST", [], [frozenset({1})], ())
    b = t.add("CONST", [], [frozenset({True})], ())
    c = t.add("CONST", [], [(1, (True,))], ())
    d = t.add("CONST", [], [(True, (1,))], ())
    assert len({a, b, c, d}) == 4
    assert t.find("CONST", [], [frozenset({True})], ()) == b
    assert t.find("CONST", [], [[1, [True]]], ()) is None     # a list is not a tuple key
    h = node_hash_table(t)
    assert len(set(h)) == 4
    back = NodeTable.from_json(t.to_json())
    assert back.nodes == t.nodes and [type(n[2][0]) for n in back.nodes] == [frozenset] * 2 + [
        tuple] * 2


@pytest.mark.parametrize("nofile", [7, 8])
def test_r31b_6_checker_that_cannot_start_is_bad_input_not_exit_1(tmp_path, nofile):
    """With RLIMIT_NOFILE 7 or 8, prove starts but the self-check's Popen fails (EMFILE in
    start_check); with 9 the trace's Popen fails and prove says so, exit 3."""
    import resource

    plan = tmp_path / "p.py"
    shutil.copy(EXAMPLES / "llama_debug_dp.py", plan)
    r = subprocess.run([sys.executable, "-m", "proofs.cli", "prove", str(plan), "--json"],
                       cwd=ROOT, env=_env(), capture_output=True, timeout=120,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                             (nofile, nofile)))
    assert r.returncode == 3, (r.returncode, r.stderr.decode()[-300:])
    assert b"Traceback" not in r.stderr
