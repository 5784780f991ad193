"""Round 47c: break stop 47's fixes of round 47a (one made class per user class with methods
dispatching on ``self``, torch's ``contract`` registry / state written, the non-leaf ``.grad``
read refused in an FSDP plan's step, an ``UnshardHandle``), against ae169d5
(``tests/adversarial/ATTEMPTS.md``, "Round 47c"). Plans in ``plans/round47c/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2``.

R47c-1: ``fsdp_grads.unsharded_grad_reads_refused`` turns torch's non-leaf ``.grad`` UserWarning
into an error with a warnings filter; the user's own filter (``catch_warnings`` +
``simplefilter("ignore")`` in a hook, r47c_01; ``filterwarnings("ignore")`` in the step, r47c_02),
or ``retain_grad()`` on the stand-in's view (no warning then, r47c_08) take R47a-5's wrong plan back to EQUIVALENT.
R47c-2: ``fully_shard`` sets ``_is_fsdp_managed_module`` on every managed module; the stand-in
does not (r47c_09). R47c-3: torch's class cache ``get_cls_to_fsdp_cls()`` does not hold the
stand-in's made classes (r47c_10). R47c-5: a user class with ``__eq__`` / ``__hash__`` aliasing modules makes torch
assert in ``fully_shard``; accepted (r47c_05). R47c-4 (needless): ``model.zero_grad()`` between the forward
and the backward (r47c_06), reading the loss's ``.grad`` (r47c_07): refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND47C = Path(__file__).resolve().parent / "plans" / "round47c"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.parametrize("name", [
    "r47c_01_nonleaf_grad_warning_ignored_wrong.py",
    "r47c_02_nonleaf_grad_filter_in_step_wrong.py",
    "r47c_08_retain_grad_view_wrong.py",
])
def test_r47c_1_nonleaf_grad_refusal_bypassed(name, tmp_path):
    """R47c-1: truth wrong (w0 0.0073, w2 0.0033); EQUIVALENT at ae169d5 (29-33 s). Since stop
    47 (the refusal by ``torch.Tensor.grad`` on the registered views, not by a warning): exit 3
    naming the hook's line (9-16 s). Since stop 48 (a real leaf, ``fsdp_unsharded``): NOT
    EQUIVALENT (15 s)."""
    out = _prove(ROUND47C / name, tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r47c_2_is_fsdp_managed_module(tmp_path):
    """R47c-2: truth wrong (w0 0.0073); EQUIVALENT at ae169d5 (42 s); NOT EQUIVALENT since stop
    47 (``contract_state.mark_managed``, 61 s)."""
    out = _prove(ROUND47C / "r47c_09_is_fsdp_managed_module_attr_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r47c_3_cls_to_fsdp_cls(tmp_path):
    """R47c-3: truth wrong (w0 0.0073); EQUIVALENT at ae169d5 (29 s); NOT EQUIVALENT since stop
    47 (the made classes in torch's ``cls_to_fsdp_cls``, 47 s)."""
    out = _prove(ROUND47C / "r47c_10_cls_to_fsdp_cls_cache_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r47c_4_zero_grad_after_forward(tmp_path):
    """R47c-4: truth right (1.4e-17); exit 3 at ae169d5 (9 s) and in stop 47; EQUIVALENT since
    stop 48 (``model.zero_grad()`` reaches FSDP2's real unsharded leaf; 43 s)."""
    out = _prove(ROUND47C / "r47c_06_model_zero_grad_after_forward_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.xfail(strict=True, reason="R47c-4: needless UNKNOWN: a .grad read of the user's own "
                   "non-leaf loss (UNKNOWN since stop 47)")
def test_r47c_4_user_nonleaf_grad_read(tmp_path):
    """R47c-4: truth right (1.4e-17); exit 3 at ae169d5 (9 s)."""
    out = _prove(ROUND47C / "r47c_07_user_nonleaf_grad_read_right.py", tmp_path)
    assert _equivalent(out), out


@pytest.mark.parametrize("name", [
    "r47c_03_state_exact_type_wrong.py",
    "r47c_04_state_vars_wrong.py",
    "r47c_11_nonleaf_grad_error_swallowed_wrong.py",
    "r47c_12_state_attr_refusal_swallowed_wrong.py",
])
def test_r47c_sound_outcomes(name, tmp_path):
    """Wrong for real (truth w0 0.0073): r47c_03 / r47c_04 UNKNOWN (42 / 27 s); r47c_11 / r47c_12
    exit 3 (10-11 s, the caught error is refused, R35d-2) at ae169d5."""
    out = _prove(ROUND47C / name, tmp_path)
    assert not _equivalent(out), out


def test_r47c_5_equal_modules_raise(tmp_path):
    """R47c-5 (contrived ``__eq__`` / ``__hash__``): the real run raises AssertionError in
    ``parallelize``; EQUIVALENT at ae169d5 (28 s); NOT EQUIVALENT since stop 47 (the unit
    methods found by identity, 61 s)."""
    out = _prove(ROUND47C / "r47c_05_module_eq_hash_methods_shared_wrong.py", tmp_path)
    assert not _equivalent(out), out
