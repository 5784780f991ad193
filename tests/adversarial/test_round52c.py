"""Adversarial round 52c: ``check-certificate --plan``'s hash-gated early re-trace (the text read
once by ``certificate_text``, passed to ``speculative_retrace`` and ``load(path, text)``) and
the CLI's ``--plan`` checks. Findings and attempts: tests/adversarial/ATTEMPTS.md, "Round 52c"."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import proofs.checker_load as checker_load
import proofs.retrace as retrace
from proofs.checker import check_certificate
from proofs.checker_load import load
from proofs.errors import CertificateError, MalformedCertificate
from proofs.retrace import EarlyRetrace, speculative_retrace
from tests.adversarial.forge import certificate, certificates_in, children

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("llama_debug_dp", "gpt2_debug_megatron", "llama_debug_cp")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("r52c")
    certificates_in(d, {f"{n}.py": ROOT / "examples" / f"{n}.py" for n in EXAMPLES[:2]})
    return d


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = ("import sys;sys.argv=['check-certificate']+sys.argv[1:];"
            "from proofs.cli import check_main;sys.exit(check_main())")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


class _Spy:
    """Records every EarlyRetrace started and whether adopt() returned it."""

    def __init__(self, monkeypatch):
        self.started: list[EarlyRetrace] = []
        self.adopted: list[bool] = []
        init, adopt = EarlyRetrace.__init__, EarlyRetrace.adopt
        spy = self

        def _init(er, *a, **k):
            init(er, *a, **k)
            spy.started.append(er)

        def _adopt(er, *a, **k):
            r = adopt(er, *a, **k)
            spy.adopted.append(r is er)
            return r
        monkeypatch.setattr(EarlyRetrace, "__init__", _init)
        monkeypatch.setattr(EarlyRetrace, "adopt", _adopt)


# --- A1: the hash appears elsewhere than plan.sha256 --------------------------------------

def test_r52c_a1a_hash_in_escaped_strings_does_not_start_the_plan(work):
    """A1a: the plan's hash inside a goal name (JSON-escaped quotes) or as ``\\u0022`` escapes:
    the gate's literal ``"sha256":"<hex>"`` is not in the text; no early re-trace."""
    h = _sha(work / "llama_debug_dp.py")
    cert = json.loads((work / "gpt2_debug_megatron.json").read_text())
    cert["obligations"][0]["name"] = '"sha256":"%s"' % h
    text = json.dumps(cert, separators=(",", ":"))
    assert speculative_retrace(work / "llama_debug_dp.py", text, 60) is None
    esc = '{"x":"\\u0022sha256\\u0022:\\u0022%s\\u0022"}' % h
    assert speculative_retrace(work / "llama_debug_dp.py", esc, 60) is None


def test_r52c_a1b_duplicate_plan_key_starts_the_plan_then_rejects_and_reaps(work, monkeypatch,
                                                                            tmp_path):
    """A1b: another plan's certificate with a leading duplicate ``"plan"`` key naming PLAN's
    hash (json keeps the last): PLAN starts early, the check rejects on the hash as without the
    early start, and no child is left."""
    monkeypatch.chdir(work)
    plan = work / "llama_debug_dp.py"
    body = (work / "gpt2_debug_megatron.json").read_text()
    forged = '{"plan":{"sha256":"%s"},' % _sha(plan) + body.lstrip()[1:]
    (tmp_path / "dup.json").write_text(forged)
    spy = _Spy(monkeypatch)
    before = children()
    with pytest.raises(CertificateError, match="does not hash to plan.sha256") as e1:
        check_certificate(tmp_path / "dup.json", plan_path=str(plan))
    assert len(spy.started) == 1 and spy.started[0].pending is not None
    assert children() - before == set()
    with pytest.raises(CertificateError) as e2:   # the same line from the plain path
        retrace.start_retrace(load(tmp_path / "dup.json"), tmp_path / "dup.json", str(plan), 60)
    assert str(e1.value) == str(e2.value)


def test_r52c_a1c_hash_in_ruleset_sha256_rejected_and_reaped(work, monkeypatch, tmp_path):
    """A1c: ``ruleset.sha256`` set to PLAN's hash on another plan's certificate (schema-valid):
    PLAN starts early, rejected, no child left."""
    monkeypatch.chdir(work)
    plan = work / "llama_debug_dp.py"
    cert = json.loads((work / "gpt2_debug_megatron.json").read_text())
    cert["ruleset"]["sha256"] = _sha(plan)
    (tmp_path / "rs.json").write_text(json.dumps(cert, separators=(",", ":")))
    spy = _Spy(monkeypatch)
    before = children()
    with pytest.raises(CertificateError):
        check_certificate(tmp_path / "rs.json", plan_path=str(plan))
    assert len(spy.started) == 1
    assert children() - before == set()


def test_r52c_a1d_gate_fires_on_malformed_text_and_reaps(work, tmp_path):
    """A1d: a truncated JSON text that names PLAN's hash: early start, MalformedCertificate,
    no child left."""
    plan = work / "llama_debug_dp.py"
    p = tmp_path / "trunc.json"
    p.write_text((work / "llama_debug_dp.json").read_text()[:-50])
    before = children()
    with pytest.raises(MalformedCertificate, match="not JSON"):
        check_certificate(p, plan_path=plan)
    assert children() - before == set()


# --- A2: gzip certificates, the same checks with and without --plan -------------------------

def _gz_variants(src: bytes, tmp: Path) -> dict[str, Path]:
    z = gzip.compress(src)
    v = {"truncated": z[:-9], "two_members": z + gzip.compress(b" "),
         "garbage_tail": z + b"\0junk", "small_not_utf8": gzip.compress(b'{"x":"\xff"}'),
         "not_utf8": gzip.compress(src[:-1] + b"\xff}"),
         "bomb": gzip.compress(src + b" " * 4096), "non_ascii": gzip.compress(
             src.replace(b'"format"', '"format", "\u00e9":1, "format"'.encode(), 1))}
    out = {}
    for k, b in v.items():
        (tmp / f"{k}.json.gz").write_bytes(b)
        out[k] = tmp / f"{k}.json.gz"
    return out


def test_r52c_a2_gzip_checks_same_with_and_without_plan(work, monkeypatch, tmp_path):
    """A2: truncated, two members, trailing garbage, not UTF-8, a bomb past the bound and
    non-ASCII text past a quarter of it: ``load(path)`` and ``check_certificate(--plan)`` raise
    the same MalformedCertificate line, and no child is left (bounds lowered so that a 1 MB
    certificate passes them)."""
    src = (work / "llama_debug_dp.json").read_bytes()
    files = _gz_variants(src, tmp_path)
    monkeypatch.setattr(checker_load, "MAX_EXPANDED_BYTES", len(src) + 1024)
    before = children()
    for kind, p in files.items():
        with pytest.raises(MalformedCertificate) as a:
            load(p)
        with pytest.raises(MalformedCertificate) as b:
            check_certificate(p, plan_path=work / "llama_debug_dp.py")
        assert str(a.value) == str(b.value), kind
        big = kind in ("bomb", "non_ascii", "not_utf8")   # (a non-ASCII 1 MB: the quarter bound)
        assert ("expands past" in str(a.value)) == big, kind
    assert children() - before == set()


def test_r52c_a2b_honest_gzip_with_plan_adopts_the_early_trace(work, monkeypatch, tmp_path):
    """A2b: an honest gzip certificate with --plan: the gate reads the expanded text, the early
    trace is started and adopted; EQUIVALENT."""
    monkeypatch.chdir(work)
    p = tmp_path / "c.json.gz"
    p.write_bytes(gzip.compress((work / "llama_debug_dp.json").read_bytes()))
    spy = _Spy(monkeypatch)
    r = check_certificate(p, plan_path="llama_debug_dp.py")
    assert r.verdict == "EQUIVALENT" and r.retraced and spy.adopted == [True]


# --- A3: --plan not a regular file (CLI) ---------------------------------------------------

@pytest.mark.slow
def test_r52c_a3_plan_not_a_file_exits_3_one_line(work, tmp_path):
    """A3: --plan a directory, a FIFO, /dev/zero, a dangling symlink: exit 3, one line, no hang
    (~1 s each)."""
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "dangle.py").symlink_to(tmp_path / "nowhere.py")
    for plan in (str(tmp_path), str(tmp_path / "fifo.py"), "/dev/zero",
                 str(tmp_path / "dangle.py")):
        r = _cli(str(work / "llama_debug_dp.json"), "--plan", plan, cwd=work)
        assert r.returncode == 3, (plan, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stdout == "", (plan, r.stderr)


@pytest.mark.slow
def test_r52c_a3b_unreadable_plan_is_a_rejection(work):
    """A3b (observation): a plan that is a regular file but cannot be read (``/proc/self/mem``:
    EIO; chmod 000 is readable as root) is exit 4, a rejection, unlike a missing one (exit 3)."""
    r = _cli(str(work / "llama_debug_dp.json"), "--plan", "/proc/self/mem", cwd=work)
    assert r.returncode == 4 and "cannot read the plan" in r.stderr


# --- A4: the certificate is read once -------------------------------------------------------

def test_r52c_a4_certificate_read_once_and_a_later_swap_is_ignored(work, monkeypatch, tmp_path):
    """A4: with --plan the certificate file is read exactly once; replacing it with another
    plan's certificate right after that read changes nothing (the text read is checked)."""
    monkeypatch.chdir(work)
    p = tmp_path / "c.json"
    shutil.copy(work / "llama_debug_dp.json", p)
    reads = []
    real = checker_load.certificate_text

    def once(path):
        reads.append(path)
        t = real(path)
        shutil.copy(work / "gpt2_debug_megatron.json", p)   # swapped after the read
        return t
    monkeypatch.setattr(checker_load, "certificate_text", once)
    orig = Path.read_bytes
    raw = []
    monkeypatch.setattr(Path, "read_bytes",
                        lambda s: (raw.append(s) if Path(s) == p else None) or orig(s))
    r = check_certificate(p, plan_path="llama_debug_dp.py")
    assert r.verdict == "EQUIVALENT" and r.total == 85
    assert len(reads) == 1 and len(raw) == 1


# --- A7: the plan read twice between the gate and the trace ------------------------------

def test_r52c_1_the_traced_bytes_are_the_hashed_bytes(work, monkeypatch, tmp_path):
    """R52c-1 (fixed: the gate's bytes are handed to ``EarlyRetrace``, which traces them and
    reads nothing itself): PLAN has the certified bytes at the gate's read and another plan's at
    a later read (a concurrent writer, simulated deterministically): the early re-trace must
    not run bytes whose hash the certificate does not name."""
    plan = tmp_path / "p.py"
    shutil.copy(work / "llama_debug_dp.py", plan)
    other = (work / "gpt2_debug_megatron.py").read_bytes()
    orig = Path.read_bytes
    n = []

    def rb(s):
        if Path(s) == plan:
            n.append(1)
            if len(n) == 2:
                plan.write_bytes(other)
        return orig(s)
    monkeypatch.setattr(Path, "read_bytes", rb)
    early = speculative_retrace(plan, (work / "llama_debug_dp.json").read_text(), 60)
    try:
        assert early is not None and len(n) == 1    # one read: hashed, then traced
        assert hashlib.sha256(early.data).hexdigest() == _sha(work / "llama_debug_dp.py")
    finally:
        if early is not None:
            early.cancel()


# --- A5, A6: honest side -------------------------------------------------------------------

@pytest.mark.slow
def test_r52c_a5_prove_self_check(tmp_path):
    """A5: ``prove llama_debug_dp.py --certificate c.json``: exit 0 with the self-check line
    (~4 s)."""
    shutil.copy(ROOT / "examples" / "llama_debug_dp.py", tmp_path / "p.py")
    code = ("import sys;sys.argv=['prove']+sys.argv[1:];"
            "from proofs.cli import prove_main;sys.exit(prove_main())")
    r = subprocess.run([sys.executable, "-c", code, "p.py", "--certificate", "c.json"],
                       cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "check: certificate re-checked by check-certificate in a fresh process: verdict " \
           "EQUIVALENT, 85 of 85 goals" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_r52c_a6_honest_examples_cli(tmp_path, name):
    """A6: three examples' certificates, plain and gzip, with and without --plan: exit 0."""
    shutil.copy(ROOT / "examples" / f"{name}.py", tmp_path / "p.py")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        certificate(Path("p.py"), tmp_path / "c.json")
    finally:
        os.chdir(old)
    (tmp_path / "c.json.gz").write_bytes(gzip.compress((tmp_path / "c.json").read_bytes()))
    for c in ("c.json", "c.json.gz"):
        for extra in ((), ("--plan", "p.py")):
            r = _cli(c, *extra, cwd=tmp_path)
            assert r.returncode == 0 and "certificate OK: verdict EQUIVALENT" in r.stdout, \
                (c, extra, r.stderr)
