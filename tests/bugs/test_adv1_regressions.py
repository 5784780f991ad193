"""Regressions for the adversarial report adv1 (false EQUIVALENT verdicts and bad-input gaps).

Each test failed before its fix. Plan files are under ``tests/bugs/plans_adv1/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.errors import CertificateError
from proofs.prover import _Run, prove
from spec_lang import load

PLANS = Path(__file__).resolve().parent / "plans_adv1"


def _prove(name: str):
    return prove(load(PLANS / f"{name}.py"), timeout_s=60)


# -- F1: dropout inside pipeline stages (per-stage generators) -----------------------------------
@pytest.mark.parametrize("name", ["pp_dropout_shared_stream", "pp_dropout_forked_pp"])
def test_f1_pipeline_dropout_is_unknown_with_note(name):
    """The shared stream (wrong: both stages draw offsets 0..) was EQUIVALENT; the pp-forked
    stream (right) was refuted. Neither is modelled: UNKNOWN, naming why."""
    r = _prove(name)
    assert r.verdict == "UNKNOWN", r.verdict
    assert r.counterexample is None
    assert r.open_goals and all("dropout inside pipeline stages is not modelled" in g.reason
                                for g in r.open_goals), [g.reason for g in r.open_goals]


def test_f1_checker_rejects_an_equivalent_pipeline_dropout_certificate(tmp_path, monkeypatch):
    """A certificate claiming EQUIVALENT for dropout in a pipeline (as the old prover wrote) is
    rejected with and without re-trace."""
    def old_check_rng(self):  # the pre-fix behaviour: the rng phase passes, assumption recorded
        self.assumptions.append("rng: dropout draws are renamed to the spec's mask symbols "
                                "(forged for the test)")
    monkeypatch.setattr(_Run, "check_rng", old_check_rng)
    r = _prove("pp_dropout_shared_stream")
    assert r.verdict == "EQUIVALENT"
    cert = tmp_path / "pp.cert.json"
    write_certificate(cert, certificate_of(r))
    monkeypatch.undo()
    with pytest.raises(CertificateError, match="dropout inside pipeline stages is not modelled"):
        check_certificate(cert, retrace=False)
    with pytest.raises(CertificateError, match="dropout inside pipeline stages is not modelled"):
        check_certificate(cert, retrace=True, plan_path=PLANS / "pp_dropout_shared_stream.py")


# -- F3: a stream created inside the traced forward with micro-batches ---------------------------
def test_f3_stream_created_in_forward_with_microbatches_is_unknown():
    r = _prove("rng_reseed_per_microbatch")
    assert r.verdict == "UNKNOWN", r.verdict
    assert all("re-seeded for every micro-batch" in g.reason for g in r.open_goals)


# -- F11: the checker requires the rng assumption when dropout masks are present ------------------
def test_f11_checker_requires_the_rng_assumption(tmp_path):
    plan = Path(__file__).resolve().parents[2] / "examples" / "bugs" / "B35_fixed.py"
    r = prove(load(plan), timeout_s=120)
    assert r.verdict == "EQUIVALENT"
    data = certificate_of(r)
    cert = tmp_path / "b35.cert.json"
    write_certificate(cert, data)
    assert check_certificate(cert, retrace=False).verdict == "EQUIVALENT"  # control
    raw = json.loads(cert.read_text())
    before = len(raw["assumptions"])
    raw["assumptions"] = [a for a in raw["assumptions"] if not a.startswith("rng:")]
    assert len(raw["assumptions"]) == before - 1
    cert.write_text(json.dumps(raw))
    for retrace in (False, True):
        with pytest.raises(CertificateError, match="rng: dropout draws are renamed"):
            check_certificate(cert, retrace=retrace, plan_path=plan)
