"""Issue 10, family 3 and deliverable 4: denominators the spec's domain allows to be 0.

A plan that divides by a per-sequence (per-rank, per-micro-batch, per-expert) count and
multiplies back is NaN where the spec is finite. It used to be EQUIVALENT: ``mul-canon``
cancelled ``n^-1 * n`` with no side condition and the refuter ignored non-finite values. Plan
files: ``tests/bugs/plans_denom/``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from proofs.certificate import certificate_of, write_certificate
from proofs.checker import check_certificate
from proofs.errors import CertificateError
from proofs.prover import prove
from proofs.replay import apply_edge, differs
from spec_lang import load
from spec_lang.evaluate import sample_inputs
from spec_lang.term import Binding

PLANS = Path(__file__).resolve().parent / "plans_denom"
pytestmark = pytest.mark.filterwarnings("ignore")   # NaN on purpose; partial-sum lint notes


def _prove(name: str, tmp_path: Path):
    report = prove(load(PLANS / f"{name}.py"), timeout_s=120)
    cert = certificate_of(report)
    path = tmp_path / f"{name}.json"
    write_certificate(path, cert)
    return report, cert, path


@pytest.mark.parametrize("name, what", [
    ("per_sequence", "sequence 1 is fully padded"),
    ("per_rank", "the share of rank dp=1 in the batch is fully padded"),
    ("per_microbatch", "micro-batch 1 of rank (dp=0) is fully padded"),
    ("empty_expert", "expert E=1 receives no tokens"),
])
def test_a_count_the_domain_allows_to_be_zero_is_refuted(name, what, tmp_path):
    report, cert, path = _prove(name, tmp_path)
    assert report.verdict == "NOT EQUIVALENT"
    cx = report.counterexample
    assert cx.goal == "loss"
    assert cx.edge is not None and cx.edge["text"].startswith(what)
    assert cx.ratio_text == "is NaN where the spec is finite"
    text = cx.render()
    assert f"input:       {what}" in text and "plan is NaN where the spec is finite" in text
    (_, spec, plan), = cx.values
    assert np.isfinite(spec) and np.isnan(plan)
    assert cert["counterexample"]["replay"]["edge"] == cx.edge
    res = check_certificate(path, retrace=False)        # the checker replays the edge case
    assert res.verdict == "NOT EQUIVALENT" and res.refuted == len(report.counterexample.others) + 1


def test_a_forged_edge_case_outside_the_domain_is_rejected(tmp_path):
    _, cert, _ = _prove("per_sequence", tmp_path)
    for edge, why in (({"kind": "zero-block", "input": "mask", "dim": "B", "parts": 2,
                        "block": 5}, "a block of a partition"),       # no such block
                      ({"kind": "zero-block", "input": "tokens", "dim": "B", "parts": 4,
                        "block": 1}, "needs a mask input"),          # tokens are not a mask
                      ({"kind": "exclude", "input": "mask", "dim": "B", "index": 1},
                       "needs a real input"),                        # -1e6 is not 0/1
                      ({"kind": "zero-block", "input": "mask", "dim": "H", "parts": 2,
                        "block": 1}, "has no dim")):
        bad = copy.deepcopy(cert)
        bad["counterexample"]["replay"]["edge"] = edge
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        with pytest.raises(CertificateError, match=why):
            check_certificate(p, retrace=False)


def test_apply_edge_keeps_the_mask_domain():
    from spec_lang.term import DimSpec, Op, term

    m = term(Op.INPUT, (), ("m", "data", "mask"), (DimSpec("B"), DimSpec("S")))
    b = Binding({"B": 4, "S": 2})
    x = sample_inputs([m], b, np.random.default_rng(0))
    x["m"][...] = 0.0
    x["m"][2, 1] = 1.0                          # the only token is in block 1 of 2
    with pytest.raises(ValueError, match="no 1 left"):
        apply_edge(x, {"kind": "zero-block", "input": "m", "dim": "B", "parts": 2, "block": 1},
                   [m], b)
    y = sample_inputs([m], b, np.random.default_rng(0))
    apply_edge(y, {"kind": "zero-block", "input": "m", "dim": "B", "parts": 4, "block": 1},
               [m], b)
    assert not y["m"][1].any() and y["m"].any()


def test_differs_counts_non_finite_values():
    spec = np.array([1.0, 2.0, np.nan, 4.0])
    plan = np.array([1.0, np.nan, np.nan, np.inf])
    assert differs(spec, plan).tolist() == [False, True, False, True]
    assert not differs(spec[:1], plan[:1]).any()


def test_the_global_count_is_cancelled(tmp_path):
    """Dividing by the *global* token count and multiplying back is justified: its normal form
    is the spec's sum(mask), which the mask domain makes > 0."""
    report, _, path = _prove("global_count", tmp_path)
    assert report.verdict == "EQUIVALENT"
    assert check_certificate(path, retrace=False).verdict == "EQUIVALENT"


def test_a_spec_denominator_is_assumed_and_listed(tmp_path):
    """The spec divides by sum(w), w real: an assumption of the verdict, recorded with its
    proof; the checker verifies it and rejects a certificate without it, with a stronger
    claim, or reusing a proof that rests on it by a renaming."""
    report, cert, path = _prove("spec_denominator", tmp_path)
    assert report.verdict == "EQUIVALENT"
    assert "spec denominators assumed (the spec is defined only where they are): sum(w) != 0" \
        in report.assumptions
    assert not any("RECIP argument" in a for a in report.assumptions)
    (entry,) = cert["denominators"]
    assert entry["requirement"] == "nonzero" and entry["text"] == "sum(w)"
    assert check_certificate(path, retrace=False).verdict == "EQUIVALENT"

    def rejected(mutate, match):
        bad = copy.deepcopy(cert)
        mutate(bad)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        with pytest.raises(CertificateError, match=match):
            check_certificate(p, retrace=False)

    rejected(lambda c: c.pop("denominators"), "needs x != 0")
    rejected(lambda c: c["denominators"][0].update(requirement="positive"),
             "does not make it positive")
    rejected(lambda c: c["denominators"][0].update(proof=0), "does not prove")
    plan_only = next(o["actual"] for o in cert["obligations"] if o["name"] == "loss")
    rejected(lambda c: c["denominators"][0].update(spec=plan_only, nf=plan_only),
             "not the argument of a RECIP")

    def reuse(c):   # grad:b is a renaming of grad:a, whose proof rests on sum(w) != 0
        o = next(o for o in c["obligations"] if o["name"] == "grad:b")
        o.pop("proof")
        o.update(method="reused", reuses="grad:a")
    rejected(reuse, "rests on an assumed spec denominator")


def test_a_forged_certificate_cancelling_a_sequence_count_is_rejected(tmp_path, monkeypatch):
    """The old behaviour, reproduced by switching the definedness guard and the refuter off:
    the prover then says EQUIVALENT for the per-sequence plan (``n_b^-1 * n_b`` cancelled); the
    checker, which derives signs with its own code, rejects that certificate."""
    import proofs.confirm as confirm
    import proofs.phases.cutting as cutting
    import proofs.refute as refute
    import rewriting.signs as signs
    from proofs.refute import Refutation

    monkeypatch.setattr(signs.Signs, "same_definedness", lambda self, x, left, right: True)
    monkeypatch.setattr(signs.Signs, "defined", lambda self, t: True)
    nothing = Refutation([], None, {})
    monkeypatch.setattr(cutting, "refute", lambda *a, **k: nothing)
    monkeypatch.setattr(confirm, "refute", lambda *a, **k: nothing)
    monkeypatch.setattr(confirm, "refute_reduced_mesh", lambda *a, **k: (nothing, None))
    monkeypatch.setattr(refute, "refute_reduced_mesh", lambda *a, **k: (nothing, None))
    report, _, path = _prove("per_sequence", tmp_path)
    assert report.verdict == "EQUIVALENT"          # what the unguarded rules prove
    with pytest.raises(CertificateError, match=r"rule (einsum-)?mul-canon: guard fails: both "
                                               r"sides defined at the same inputs"):
        check_certificate(path, retrace=False)
