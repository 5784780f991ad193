"""Adversarial round (issue 10 item 8, issue 13): forged certificates the checker must reject.

Each test builds a genuine certificate of a wrong plan (``prove`` refutes it), forges an
EQUIVALENT one with the checker's own public functions, and asserts that ``check-certificate``
(with the plan re-traced) rejects it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.checker import check_certificate
from proofs.errors import CertificateError

from tests.adversarial.forge import (certificate, forge_refutation, forge_smt, part_hashes,
                                     write)

PLANS = Path(__file__).resolve().parent / "plans"


def test_input_named_like_a_part_addend(tmp_path):
    text = (PLANS / "part_alias.py.in").read_text()
    first = tmp_path / "plan.py"
    first.write_text(text.replace("@YNAME@", "y"))
    (h,) = part_hashes(first)                      # PART(x, dp) does not depend on y's name
    first.write_text(text.replace("@YNAME@", f"part:{h[:16]}@0"))
    cert = certificate(first, tmp_path / "genuine.json")
    assert cert["verdict"] == "NOT EQUIVALENT"     # the refuter sees the plan is wrong
    forged = write(tmp_path / "forged.json", forge_smt(cert))
    with pytest.raises(CertificateError):
        check_certificate(forged, plan_path=first)


def test_overflow_is_not_a_refutation(tmp_path):
    plan = PLANS / "lse_noshift.py"                # equal over the reals (no max shift)
    cert = certificate(plan, tmp_path / "genuine.json")
    assert cert["verdict"] != "NOT EQUIVALENT"
    edge = {"kind": "exclude", "input": "x", "dim": "V", "index": 3}   # logit +1e6 * w[3] > 0
    forged = forge_refutation(cert, seed=0, edge=edge)
    assert forged is not None and forged["counterexample"]["goal"] == "loss"
    with pytest.raises(CertificateError):
        check_certificate(write(tmp_path / "forged.json", forged), plan_path=plan)
