"""``check-certificate CERT --plan PLAN`` starts re-tracing PLAN before reading CERT
(``proofs.retrace.speculative_retrace``); the guess is used only when the certificate confirms
it, and nothing is left running when the certificate is bad."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from proofs.checker import check_certificate
from proofs.errors import CertificateError, MalformedCertificate
from proofs.retrace import EarlyRetrace, speculative_retrace
from tests.adversarial.forge import certificates_in, children

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "examples" / "llama_debug_dp.py"


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("spec")
    certificates_in(d, {"plan.py": PLAN})   # plan.json records the path as given: plan.py
    return d


def _text(data: bytes) -> str:
    return '{"plan":{"sha256":"%s"}}' % hashlib.sha256(data).hexdigest()


def test_the_guess_is_the_path_as_given_and_the_front_end_from_the_file(cert_dir, tmp_path):
    text = (cert_dir / "plan.json").read_text()
    early = speculative_retrace(cert_dir / "plan.py", text, 60)
    try:
        assert (early.path, early.frontend) == (str(cert_dir / "plan.py"), "dsl")
        assert early.pending is not None
    finally:
        early.cancel()
    torch_file = tmp_path / "train.py"
    torch_file.write_text("import torch\n")
    early = speculative_retrace(torch_file, _text(torch_file.read_bytes()), 60)
    early.cancel()
    assert early.frontend == "torch"
    assert speculative_retrace(tmp_path / "nope.py", text, 60) is None


def test_a_text_that_does_not_name_the_plan_runs_nothing(cert_dir, tmp_path):
    # R52b-1: a file that is no certificate, or a certificate of another plan, never runs the
    # plan's code (before the certificate is parsed and its plan.sha256 compared)
    plan = cert_dir / "plan.py"
    assert speculative_retrace(plan, '{"format": "x"}', 60) is None
    other = _text(b"another plan")
    assert speculative_retrace(plan, other, 60) is None
    early = speculative_retrace(plan, _text(plan.read_bytes()), 60)
    assert early is not None
    early.cancel()


def test_a_confirmed_guess_is_adopted_and_a_wrong_one_retraced(cert_dir, monkeypatch):
    cert = json.loads((cert_dir / "plan.json").read_text())
    monkeypatch.chdir(cert_dir)
    text = (cert_dir / "plan.json").read_text()
    early = speculative_retrace("plan.py", text, 60)
    assert early.adopt(cert, cert_dir / "plan.json", "plan.py") is early
    early.cancel()
    # the user names the file another way than prove did: the certificate's path is traced
    other = speculative_retrace(cert_dir / "plan.py", text, 60)
    fresh = other.adopt(cert, cert_dir / "plan.json", cert_dir / "plan.py")
    try:
        assert fresh is not other and not isinstance(fresh, EarlyRetrace)
        assert other.pending.proc.poll() is not None      # the guess's child is ended
    finally:
        fresh.cancel()
    res = check_certificate(cert_dir / "plan.json", plan_path=cert_dir / "plan.py")
    assert res.verdict == "EQUIVALENT" and res.retraced and res.checked == res.total


def test_a_bad_certificate_leaves_no_retrace_running(cert_dir, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    before = children()
    with pytest.raises(MalformedCertificate):
        check_certificate(bad, plan_path=cert_dir / "plan.py")
    assert children() - before == set()
    # a certificate of another plan: rejected on the hash, the guess's child ended too
    cert = json.loads((cert_dir / "plan.json").read_text())
    cert["plan"]["sha256"] = "0" * 64
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(cert))
    with pytest.raises(CertificateError, match="does not hash to plan.sha256"):
        check_certificate(forged, plan_path=cert_dir / "plan.py")
    assert children() - before == set()
