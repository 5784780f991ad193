"""Round 47d: break stop 47's last fixes (``fsdp_grads.unsharded_grad_reads_refused`` as a
``torch.Tensor.grad`` property refusing the registered views, made classes in torch's own caches,
``contract_state.mark_managed``, FSDP2 mixed precision), against 778365a
(``tests/adversarial/ATTEMPTS.md``, "Round 47d"). Plans in ``plans/round47d/``. Truth:
``tests/adversarial/torch4_truth.py FILE 2``.

R47d-1: the property guards one of torch's getsets only: ``p._grad`` (r47d_02) and
``torch._C.TensorBase.__dict__["grad"].__get__(p)`` (r47d_01) read the view's gradient (None;
set for real). R47d-2: the stand-in's view differs from FSDP2's unsharded parameter (and the
DDP-based replicate's parameter) in ``is_leaf`` / ``grad_fn`` / ``isinstance(.., nn.Parameter)``
inside the unit's forward (r47d_03 / 05 / 07 / 11 accepted while wrong; the right twin r47d_04
refuted). R47d-3: a class the plan puts in ``get_cls_to_fsdp_cls()`` is used by torch, replaced by
the stand-in (r47d_09). R47d-4: nested units with float16 inside a bf16 root: torch raises
("mat1 and mat2 must have the same dtype"), accepted (r47d_10). R47d-5 (needless): a ``.grad``
read in a forward hook under the DDP-based ``replicate`` (None for real) is refused (r47d_08).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROUND47D = Path(__file__).resolve().parent / "plans" / "round47d"

pytestmark = pytest.mark.slow


def _equivalent(out: dict) -> bool:
    return out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


def test_r47d_1_grad_refusal_bypassed(tmp_path):
    """R47d-1: truth wrong (w2 0.0033); EQUIVALENT at 778365a (57 s) and in stop 47 (32 s).
    Since stop 48 (FSDP2's unsharded parameter a real leaf, ``fsdp_unsharded``): NOT
    EQUIVALENT (15 s)."""
    out = _prove(ROUND47D / "r47d_01_base_grad_getset_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


def test_r47d_1_underscore_grad_refused(tmp_path):
    """R47d-1: ``p._grad`` in the hook: truth wrong (w2 0.0033); EQUIVALENT at 778365a (47 s);
    exit 3 naming the line in stop 47 (14 s); NOT EQUIVALENT since stop 48 (15 s)."""
    out = _prove(ROUND47D / "r47d_02_underscore_grad_wrong.py", tmp_path)
    assert out["_rc"] == 1 and out.get("verdict") == "NOT EQUIVALENT", out


@pytest.mark.parametrize("name", [
    "r47d_03_is_leaf_in_forward_wrong.py",
    "r47d_05_grad_fn_in_forward_wrong.py",
    "r47d_07_ddp_replicate_is_leaf_wrong.py",
    "r47d_11_isinstance_parameter_in_forward_wrong.py",
])
def test_r47d_2_view_not_a_leaf_parameter(name, tmp_path):
    """R47d-2: truth wrong (w0 0.0064, w2 0.0033); EQUIVALENT at 778365a (33-57 s). Since stop
    47: exit 3 (``is_leaf`` / ``grad_fn`` read from user code, 10-16 s) or NOT EQUIVALENT (the
    view answers ``isinstance(w, nn.Parameter)``, 30 s)."""
    out = _prove(ROUND47D / name, tmp_path)
    assert not _equivalent(out), out


def test_r47d_2_right_twin(tmp_path):
    """R47d-2 twin: truth right (1.4e-17); NOT EQUIVALENT at 778365a (51 s), exit 3 in stop 47;
    EQUIVALENT since stop 48 (the unsharded parameter a real leaf; 14 s)."""
    out = _prove(ROUND47D / "r47d_04_not_leaf_in_forward_right.py", tmp_path)
    assert _equivalent(out), out


def test_r47d_3_prepopulated_class_cache(tmp_path):
    """R47d-3 (contrived): truth wrong (w0 0.0084); EQUIVALENT at 778365a (33 s); exit 3 since
    stop 47 (7 s)."""
    out = _prove(ROUND47D / "r47d_09_cls_cache_prepopulated_wrong.py", tmp_path)
    assert out["_rc"] == 3 and "R47d-3" in out["_err"], out


def test_r47d_4_nested_policies_raise(tmp_path):
    """R47d-4: the real run raises RuntimeError in the forward; EQUIVALENT at 778365a (29 s);
    exit 3 naming the line since stop 47 (``backend_rejects.why_mixed_dtypes``, 44 s)."""
    out = _prove(ROUND47D / "r47d_10_nested_mp_fp16_no_branch_raises.py", tmp_path)
    assert out["_rc"] == 3 and "must have the same dtype" in out["_err"], out


def test_r47d_nested_policies_branch_not_accepted(tmp_path):
    """r47d_06 (raises for real too): NOT EQUIVALENT at 778365a (59 s)."""
    out = _prove(ROUND47D / "r47d_06_nested_mp_fp16_branch_wrong.py", tmp_path)
    assert not _equivalent(out), out


@pytest.mark.xfail(strict=True, reason="R47d-5: needless refusal: .grad of the DDP-based "
                   "replicate's parameter read in a forward hook (None for real)")
def test_r47d_5_ddp_replicate_grad_read_needless(tmp_path):
    """R47d-5: truth right (1.4e-17); exit 3 at 778365a (9 s)."""
    out = _prove(ROUND47D / "r47d_08_ddp_replicate_grad_read_in_forward_right.py", tmp_path)
    assert _equivalent(out), out


def test_r47d_fsdp_replicate_not_marked_managed(tmp_path):
    """r47d_12: the FSDP-based replicate sets no ``_is_fsdp_managed_module`` (torch 2.13), nor
    does the stand-in: truth right (1.4e-17); EQUIVALENT at 778365a (45 s)."""
    out = _prove(ROUND47D / "r47d_12_fsdp_replicate_managed_flag_right.py", tmp_path)
    assert _equivalent(out), out
