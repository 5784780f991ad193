"""Adversarial round 31d (``tests/adversarial/ATTEMPTS.md``, "Round 31d"), against wip/adv31d at
28aa88b (= main: R31-1 ``op_guard.work_changes``, R31c-1 ``BitwiseOr`` fitted by position,
round 31b's fixes, ``kernel._exact_key``). Plans in ``plans/round31d/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2`` (dp), ``tests/torch_frontend/pp_truth.py FILE``
(pp); gloo, float64.

* R31d-1 (false accept; ``r31d_01`` dp 2, ``r31d_03`` pp 2): R31-1's fix compares the
  namespaces of ``torch._C._distributed_c10d.Work`` and its subclasses, but a Work's ``wait``
  is found through its type's ``tp_getattro``, which a ``__getattribute__`` set on Work's
  *base*, ``pybind11_builtins.pybind11_object`` (shared by every pybind class of torch),
  replaces for every subclass. Set around the call (dp: the gradient ``dist.all_reduce``s; pp:
  ``schedule.step``, keyed on torch's own ``schedules._wait_batch_p2p``, which the capture
  does not patch) and deleted after it, it hands back a no-op ``wait``: no Work namespace
  changes, no train-file frame while a node is recorded, the same in the trace and the real
  run (no detection of the capture). Truth dp update 0.0067 / 0.010 (control ``r31d_02``
  5.6e-17, EQUIVALENT); pp grad l0.weight 0.020, l1.weight 0.20 (control ``r31d_04`` <= 5.6e-17).
* R31d-2 (false accept; ``r31d_05`` dp 2): ``rules_norm.LayerNorm`` multiplies by ``w.term`` and
  adds ``b.term`` by name (no ``Lowering.fit``; the sibling of R31c-1). A weight whose dim is
  the twin of the normalised tensor's *batch* dim (``layer_norm(sq, (h,), sq.sum(1))`` of a
  square ``sq``) is applied along that dim: the spec and the wrong plan ``layer_norm(sq) *
  sq.sum(1, keepdim=True)`` get one IR. Truth update sq 0.235, step 2 0.275.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND31D = Path(__file__).resolve().parent / "plans" / "round31d"


def _not_accepted(out: dict) -> bool:
    """Anything but EQUIVALENT: NOT EQUIVALENT, UNKNOWN or a refusal (exit 3)."""
    return out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT"


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(name: str, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(ROUND31D / name, tmp_path)


# -- findings (strict xfail: the right outcome asserted) ---------------------------------------

def test_r31d_1_pybind_object_getattribute_is_tampering():
    """The mechanism alone (fast): with the hook in place, ``op_guard.tampered`` (which calls
    ``work_changes``) should name it; it returns [] at 28aa88b."""
    import torch

    from spec_lang.torch_frontend import op_guard

    base = op_guard.take_baseline()
    before = op_guard.namespaces()
    W = torch._C._distributed_c10d.Work  # noqa: SLF001
    pb = W.__mro__[1]
    orig = pb.__getattribute__

    def getattribute(self, name):
        if name == "wait" and isinstance(self, W):
            return lambda *a, **k: True
        return orig(self, name)

    pb.__getattribute__ = getattribute
    try:
        found = op_guard.tampered(base, before)
    finally:
        del pb.__getattribute__
    assert found, "a no-op wait handed out by pybind11_object.__getattribute__ not seen"


@pytest.mark.slow
def test_r31d_1_dp_pybind_getattribute_wait_is_not_accepted(tmp_path):
    """EQUIVALENT at 28aa88b (4 goals, 63 s); truth update w1 0.0067, w2 0.010."""
    out = _prove("r31d_01_dp_pybind_getattribute_wait.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r31d_1_pp_pybind_getattribute_wait_is_not_accepted(tmp_path):
    """EQUIVALENT at 28aa88b (9 goals, 136 s); truth grad l0.weight 0.020, l1.weight 0.20."""
    out = _prove("r31d_03_pp_pybind_getattribute_wait.py", tmp_path)
    assert _not_accepted(out), out


# -- controls (right outcomes) -----------------------------------------------------------------

@pytest.mark.slow
def test_r31d_dp_pybind_getattribute_control_is_equivalent(tmp_path):
    """The hook hands back the real wait: right (truth 5.6e-17), EQUIVALENT (83 s). A fix that
    refuses any such hook turns this into a documented false refusal."""
    out = _prove("r31d_02_dp_pybind_getattribute_control.py", tmp_path)
    assert _equivalent(out) or out["_rc"] == 3, out


# -- R31d-2: layer_norm's weight and bias joined by name ---------------------------------------

@pytest.mark.parametrize("which", ["weight", "bias"])
def test_r31d_2_layer_norm_weight_of_a_twin_dim_lowering(which):
    """Float64 against torch (fast): ``layer_norm(m, (5,), w)`` with ``w = m.sum(1)`` (its dim
    the twin of ``m``'s first) is lowered as ``layer_norm(m) * m.sum(1, keepdim=True)``."""
    import torch
    import torch.nn.functional as F

    from tests.torch_frontend.harness import check_fn

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        m = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
        if which == "weight":
            check_fn(lambda m: F.layer_norm(m, (5,), m.sum(1)), m)
        else:
            check_fn(lambda m: F.layer_norm(m, (5,), None, m.sum(1)), m)
    finally:
        torch.set_default_dtype(old)


@pytest.mark.slow
def test_r31d_2_dp_layer_norm_weight_twin_is_not_accepted(tmp_path):
    """EQUIVALENT at 28aa88b (2 goals, 63 s); truth update sq 0.235, step 2 0.275."""
    out = _prove("r31d_05_dp_layer_norm_weight_twin_buggy.py", tmp_path)
    assert _not_accepted(out), out


@pytest.mark.slow
def test_r31d_pp_pybind_getattribute_control_is_equivalent(tmp_path):
    """r31d_03 handing back the real wait: right (truth <= 5.6e-17), EQUIVALENT (98 s)."""
    out = _prove("r31d_04_pp_pybind_getattribute_control.py", tmp_path)
    assert _equivalent(out) or out["_rc"] == 3, out
