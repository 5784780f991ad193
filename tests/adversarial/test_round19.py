"""Adversarial round 19 (``tests/adversarial/ATTEMPTS.md``, "Round 19"), against stop 25's
round-18 fixes.

* R19-1 (fixed) ``r19_01``: ``torch.ops.aten.lift(x)`` returns ``x`` itself, but its schema
  (``lift(Tensor self) -> Tensor``) says nothing of it, so ``lift(x).mul_(2.0)`` on the parallel
  side was a write no reader of ``x`` saw: EQUIVALENT, the check agreeing (truth: 0.0242 /
  0.0241 after one step). Fixed: ``lift`` and ``lift_fresh`` are relabelling views.
* R19-2 (open, strict xfail) ``r19_02`` / ``r19_03``: a 0 / 0 that float64 makes and the
  reals do not, without an underflow numpy reports (products underflowing inside
  ``np.einsum``; ``(x^2 + 1 + 1e20) - 1e20`` rounding to 0): the plan ``x w c / c`` is NaN where
  the spec is finite and is refuted, the checker agreeing. The R17-1 family: a witness needs
  re-evaluating exactly or in higher precision before it is reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from proofs.cli import prove_main
from spec_lang.torch_frontend.lower import _storage_roots
from tests.adversarial.torch_prove import prove

ROUND19 = Path(__file__).resolve().parent / "plans" / "round19"


def _lifted(x):
    return torch.ops.aten.lift(x), torch.ops.aten.lift_fresh(x)


def test_lift_is_the_tensor_itself():
    x = torch.zeros(4, 3, dtype=torch.float64)
    assert torch.ops.aten.lift(x).untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    gm = make_fx(_lifted, tracing_mode="fake")(x)
    roots = _storage_roots(gm)
    ph = next(n for n in gm.graph.nodes if n.op == "placeholder")
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    lift, fresh = out
    assert str(lift.target) == "aten.lift.default" and roots[lift] == (ph, True)
    # make_fx records lift_fresh as lift_fresh_copy: a copy, its own storage
    assert str(fresh.target) == "aten.lift_fresh_copy.default" and roots[fresh] == (fresh, True)


@pytest.mark.slow
def test_a_write_through_lift_is_not_equivalent(tmp_path):
    out = prove(ROUND19 / "r19_01_lift_alias.py", tmp_path)
    assert out.get("verdict") != "EQUIVALENT" and out["_rc"] != 0, out


@pytest.mark.xfail(strict=True, reason="R19-2 (open): a float64 0/0 the reals do not have, "
                   "with no underflow numpy reports, is taken for a divergence")
@pytest.mark.parametrize("name", ["r19_02_einsum_underflow.py", "r19_03_cancel_zero.py"])
def test_a_float_only_zero_division_is_no_counterexample(name, capsys):
    got = prove_main([str(ROUND19 / name), "--no-check"])
    out = capsys.readouterr().out
    assert got != 1 and not out.startswith("NOT EQUIVALENT"), out[:400]
