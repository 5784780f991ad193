"""Adversarial round 2: forged certificates against the z3 inputs' namespace
(``in:<kind>:<name>[index]``, proofs/smt.py).

Each test proves a wrong plan (``prove`` refutes it: the evaluator keeps the inputs apart), forges
an EQUIVALENT certificate with one regenerated ``smt`` step per obligation
(``tests/adversarial/forge.py``), and runs ``check-certificate`` with the plan re-traced.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.checker import check_certificate
from proofs.errors import CertificateError

from tests.adversarial.forge import certificate, forge_smt, write

PLANS = Path(__file__).resolve().parent / "plans"


# fixed (was a strict xfail): finding R2-7, injective z3 input names; proofs/kernel.py checks INPUT kinds and domains
def test_input_kind_with_a_colon_is_not_the_spec_input(tmp_path):
    plan = PLANS / "n01_kind_colon.py"
    cert = certificate(plan, tmp_path / "genuine.json")
    assert cert["verdict"] == "NOT EQUIVALENT"
    forged = write(tmp_path / "forged.json", forge_smt(cert))
    with pytest.raises(CertificateError):
        check_certificate(forged, plan_path=plan)


def test_redeclared_domain_does_not_constrain_the_spec_input(tmp_path):
    """Rejected (kept as a regression): the plan redeclares the spec's real ``x`` as
    ``positive``; z3 creates one constant per key with the premises of the first node encoded
    (the spec's), so ``maximum(x, 0) == x`` stays sat. (Order-dependent: proofs/smt.py adds a
    domain premise only when it creates the constant.)"""
    plan = PLANS / "n02_domain_leak.py"
    cert = certificate(plan, tmp_path / "genuine.json")
    assert cert["verdict"] == "NOT EQUIVALENT"
    forged = write(tmp_path / "forged.json", forge_smt(cert))
    with pytest.raises(CertificateError, match="sat"):
        check_certificate(forged, plan_path=plan)


@pytest.mark.parametrize("attrs", [["b", "data:a", "real"], ["b", "data", "complex"],
                                   ["b", "data", "index"], ["b", "data", "real", "V"],
                                   ["", "param", "real"]])
def test_the_kernel_rejects_inputs_outside_the_kinds_and_domains(attrs):
    """Finding R2-7's class: an INPUT's attributes are (name, kind, domain[, range dim]) with
    kind in param/data/state and the range dim exactly when the domain is index."""
    from proofs.kernel import KernelError, NodeTable, typecheck
    t = NodeTable.from_json([["INPUT", [], attrs, [["B", []]]]])
    with pytest.raises(KernelError, match="INPUT"):
        typecheck(t, 0)


def test_the_kernel_accepts_the_dsl_input_forms():
    from proofs.kernel import NodeTable, typecheck
    t = NodeTable.from_json([["INPUT", [], ["w", "param", "real"], [["H", []]]],
                             ["INPUT", [], ["v", "state", "positive"], [["H", []]]],
                             ["INPUT", [], ["y", "data", "index", "V"], [["B", []]]]])
    for i in range(3):
        typecheck(t, i)
