"""Adversarial round 53c (``tests/adversarial/ATTEMPTS.md``, "Round 53c"): the fixes of round
53b (a held tensor's fingerprint in ``step_state``; ``meta_constants``' alias refusal and
``fake_deepcopy`` of a parameter in ``deep_copies``).

Plans in ``plans/round53c/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``*_wrong`` plan differs from the single-device run at step 1 or 2). The fast tests
check the pieces directly (the findings, fixed at stop 53); the slow ones prove the plans.
"""

from __future__ import annotations

import copy
import ctypes
from pathlib import Path

import pytest
import torch
from torch import nn

ROUND = Path(__file__).resolve().parent / "plans" / "round53c"


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


def _not_equivalent(out: dict) -> bool:
    return not (out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT")


def _fingerprint(v: object) -> str:
    from spec_lang.torch_frontend.step_state import _Encoder, _text

    return _text(_Encoder({}, frozenset()), v)


class _Seen(torch.Tensor):
    pass


# -- R53c-1..3: state of a held tensor the fingerprint does not read ----------------------------

# R53c-1: fixed at stop 53 (was a strict xfail)
def test_r53c_1_class_swap_in_fingerprint():
    """R53c-1: ``C.__class__ = Seen`` on a held tensor (no version bump, no attribute) left
    its fingerprint unchanged; ``type(C) is Seen`` is a step counter the next step reads."""
    t = torch.zeros(1)
    before = _fingerprint({"c": t})
    t.__class__ = _Seen
    assert type(t) is _Seen and t._version == 0  # noqa: SLF001
    assert _fingerprint({"c": t}) != before


# R53c-2: fixed at stop 53 (was a strict xfail)
def test_r53c_2_storage_attribute_in_fingerprint():
    """R53c-2: a Python attribute on a held tensor's storage object (``untyped_storage()``
    keeps its Python object) is state the next step reads; the fingerprint did not see it."""
    t = torch.zeros(1)
    before = _fingerprint({"c": t})
    t.untyped_storage().seen = True
    assert t.untyped_storage().seen is True
    assert _fingerprint({"c": t}) != before


# R53c-3: fixed at stop 53 (was a strict xfail)
def test_r53c_3_value_write_without_version_in_fingerprint():
    """R53c-3: a held real cpu tensor's values written through ``ctypes`` at ``data_ptr()``
    (no aten op: no version bump, and it works under the trace's fake mode) left the
    fingerprint unchanged; only the version stood for the values."""
    t = torch.zeros(1, dtype=torch.float64)
    before = _fingerprint({"c": t})
    ctypes.c_double.from_address(t.data_ptr()).value += 1.0
    assert t.item() == 1.0 and t._version == 0  # noqa: SLF001
    assert _fingerprint({"c": t}) != before


# -- R53c-4: fake_deepcopy takes a tensor the user marked ``_is_param`` as a parameter ----------

# R53c-4: fixed at stop 53 (was a strict xfail)
def test_r53c_4_marked_tensor_deepcopy_like_torch():
    """R53c-4: for real ``copy.deepcopy`` of a plain tensor with the attribute
    ``_is_param = True`` is ``Tensor.__deepcopy__`` (gradient and attributes kept); the capture
    took it for a parameter and dropped both. Right: the same answer, or a refusal."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.deep_copies import fake_deepcopy

    real = torch.zeros(2, requires_grad=True)
    real.grad, real._is_param = torch.ones(2), True
    want = copy.deepcopy(real)
    assert want.grad is not None and type(want) is torch.Tensor
    deepcopy = fake_deepcopy(torch.Tensor.__deepcopy__)
    with FakeTensorMode():
        ft = torch.zeros(2, requires_grad=True)
        ft.grad = torch.ones(2)
        ft._is_param = True
        try:
            got = deepcopy(ft, {})
        except PlanError:
            return
    assert got.grad is not None


def test_r53c_parameter_deepcopy_still_like_torch():
    """Control (R53b-4 kept): a real parameter's deep copy has neither gradient nor
    attributes, tied parameters are copied once, ``requires_grad=False`` is kept."""
    p = nn.Parameter(torch.ones(2), requires_grad=False)
    p.tag = 1
    m = nn.Module()
    m.a, m.b = p, p
    c = copy.deepcopy(m)
    assert c.a is c.b and c.a is not p and not c.a.requires_grad
    assert not hasattr(c.a, "tag") and c.a.grad is None


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "r53c_01_held_tensor_class_swap_counter_wrong.py",  # R53c-1, fixed at stop 53
    "r53c_02_held_tensor_storage_attribute_counter_wrong.py",  # R53c-2, fixed at stop 53
    "r53c_03_held_tensor_value_via_ctypes_wrong.py",  # R53c-3, fixed at stop 53
    "r53c_04_tensor_marked_is_param_deepcopy_wrong.py",  # R53c-4, fixed at stop 53
    "r53c_07_param_subclass_own_deepcopy_wrong.py",  # R53c-5, fixed at stop 53
    "r53c_05_torch_tensor_class_attribute_counter_wrong.py",
    "r53c_06_param_storage_set_in_step_wrong.py",
    "r53c_08_fake_key_named_attribute_counter_wrong.py",
])
def test_r53c_wrong_plans_not_equivalent(name, tmp_path):
    """Each plan is wrong at step 1 or 2 (``torch4_truth.py``); EQUIVALENT is a false accept
    (a refusal, exit 3, or UNKNOWN is fine)."""
    out = _prove(ROUND / name, tmp_path)
    assert _not_equivalent(out), out


def test_r53c_meta_aliases_of_parameter_refused():
    """Control (R53b-2 kept): every alias of a meta parameter made before the step is refused
    at its first use (``set_`` onto its storage, ``as_strided``, ``.data``, ``detach``,
    ``_make_subclass``); a deep copy is taken as a constant."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.deep_copies import meta_constants

    p = nn.Parameter(torch.empty(3, 3, device="meta"))
    aliases = [torch.tensor([], device="meta").set_(p.untyped_storage()),
               torch.empty(0, device="meta").set_(p.untyped_storage(), 0, (9,), (1,)),
               torch.as_strided(p.detach(), (9,), (1,)), p.data, p.detach(),
               torch.Tensor._make_subclass(torch.Tensor, p.detach())]
    for a in aliases:
        mode = FakeTensorMode()
        with pytest.raises(PlanError, match="R53b-2"), meta_constants(mode), mode:
            a.mul_(2.0)
    own = copy.deepcopy(p)          # made before the step (in parallelize)
    mode = FakeTensorMode()
    with meta_constants(mode), mode:
        assert tuple(own.mul(2.0).shape) == (3, 3)
