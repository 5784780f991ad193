"""FSDP2's ``MixedPrecisionPolicy`` in the stand-in (``spec_lang/torch_frontend/
fsdp_mixed_precision.py``, R47-1): which tensors are cast, to what, and what is refused, against
torch 2.13's own rules (``FSDPParam.init_dtype_attrs``, ``_cast_fp_tensor``). Hand-made units, no
process group; the end-to-end proves are the slow tests of ``tests/adversarial/test_round47.py``.
"""

from __future__ import annotations

import collections
import types

import pytest
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import fsdp_mixed_precision as mp

BF16, F32, F64 = torch.bfloat16, torch.float32, torch.float64


def _unit(policy, fsdp_state=True):
    return types.SimpleNamespace(settings={"mp_policy": policy, "_site": "train.py:7"},
                                 fsdp_state=fsdp_state)


@pytest.mark.parametrize("policy, stored, expect", [
    (None, F32, None),
    (MixedPrecisionPolicy(), F32, None),
    (MixedPrecisionPolicy(param_dtype=BF16), F32, BF16),
    (MixedPrecisionPolicy(param_dtype=F32), F32, None),          # the same dtype: clamped
    (MixedPrecisionPolicy(param_dtype=BF16), torch.int64, None),  # not floating: clamped
    (MixedPrecisionPolicy(param_dtype=F32, reduce_dtype=F64), F64, F32),
])
def test_param_dtype_clamps_as_init_dtype_attrs(policy, stored, expect):
    assert mp.param_dtype(_unit(policy), torch.zeros(2, dtype=stored)) == expect


def test_param_dtype_none_for_ddp_replicate():
    """A unit without FSDP2 state (the DDP-based ``replicate``) is never cast."""
    u = _unit(MixedPrecisionPolicy(param_dtype=BF16), fsdp_state=False)
    assert mp.param_dtype(u, torch.zeros(2)) is None


def test_to_param_dtype_casts_and_gradient_comes_back_in_the_stored_dtype():
    """The unsharded parameter is bf16; autograd's cast brings its gradient back to float32
    before the reduction (the values equal over the reals: here exactly, powers of two)."""
    stored = torch.tensor([0.5, -2.0, 4.0], requires_grad=True)
    full = mp.to_param_dtype(_unit(MixedPrecisionPolicy(param_dtype=BF16)), stored, stored * 1)
    assert full.dtype == BF16
    (full.float() * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert stored.grad.dtype == F32
    assert torch.equal(stored.grad, torch.tensor([1.0, 2.0, 3.0]))


def test_cast_inputs_nested_floating_only():
    """``_cast_fp_tensor`` over nested containers: floating tensors to ``param_dtype``,
    integer tensors and non-tensors untouched (torch 2.13 ``_apply_to_tensors``)."""
    Pair = collections.namedtuple("Pair", "a b")
    u = _unit(MixedPrecisionPolicy(param_dtype=BF16))
    args = (torch.zeros(2), [torch.zeros(2, dtype=torch.long), 3], Pair(torch.zeros(1), "s"))
    kwargs = {"mask": torch.ones(2, dtype=F64), "n": 1.5}
    a, k = mp.cast_inputs(u, args, kwargs)
    assert a[0].dtype == BF16 and a[1][0].dtype == torch.long and a[1][1] == 3
    assert isinstance(a[2], Pair) and a[2].a.dtype == BF16 and a[2].b == "s"
    assert k["mask"].dtype == BF16 and k["n"] == 1.5


@pytest.mark.parametrize("policy", [
    None, MixedPrecisionPolicy(), MixedPrecisionPolicy(param_dtype=BF16,
                                                       cast_forward_inputs=False)])
def test_cast_inputs_none_when_nothing_is_cast(policy):
    assert mp.cast_inputs(_unit(policy), (torch.zeros(1),), {}) is None


def test_cast_output_to_output_dtype():
    u = _unit(MixedPrecisionPolicy(param_dtype=BF16, output_dtype=F32))
    out = mp.cast_output(u, {"y": torch.zeros(2, dtype=BF16), "i": torch.zeros(1, dtype=torch.int)})
    assert out["y"].dtype == F32 and out["i"].dtype == torch.int
    assert mp.cast_output(_unit(MixedPrecisionPolicy(param_dtype=BF16)), torch.zeros(1)) is None


def test_check_policy_refuses_a_non_policy():
    mp.check_policy(_unit(MixedPrecisionPolicy(param_dtype=BF16)))
    mp.check_policy(_unit(None))
    with pytest.raises(PlanError, match=r"train\.py:7: mp_policy=.*not a .*MixedPrecisionPolicy"):
        mp.check_policy(_unit({"param_dtype": BF16}))


def test_no_output_cast_refuses_an_incomplete_group_with_output_dtype():
    hold = types.SimpleNamespace(u=_unit(MixedPrecisionPolicy(output_dtype=F32)))
    with pytest.raises(PlanError, match=r"train\.py:7: .*output_dtype"):
        mp.no_output_cast([hold])
    mp.no_output_cast([types.SimpleNamespace(u=_unit(MixedPrecisionPolicy(param_dtype=BF16)))])
