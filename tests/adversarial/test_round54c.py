"""Adversarial round 54c (``tests/adversarial/ATTEMPTS.md``, "Round 54c"): d707ad6's fixes of
round 54b: a goal fake tensor's ``constant`` by kind only (``process_state.fake_constant``), a
parameter's creation keys skipped while they hold None or a torch object
(``process_state.torch_internal``), held tensors' storages numbered (``storage_no``).

Plans in ``plans/round54c/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``*_wrong`` plan differs from the single-device run at step 2: w0 0.0058 with SGD,
0.0034 with Adam). The fast tests call ``step_state`` directly; the slow ones prove the plans.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

ROUND = Path(__file__).resolve().parent / "plans" / "round54c"
KEYS = frozenset({"constant", "_nested_int_memo"})     # two of a FakeTensor's creation keys


def _param_text(set_attr) -> tuple[str, str]:
    """The ``parameter weight attributes`` entry of ``step_state`` before and after
    ``set_attr(weight)``, with the weight's creation keys ``KEYS`` (as the tracer passes)."""
    from spec_lang.torch_frontend.step_state import step_state

    model = torch.nn.Linear(2, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    base = {id(model.weight): dict.fromkeys(KEYS)}   # created holding None (stop 54: values)
    key = "parameter weight attributes"
    before = step_state(model, opt, [], base_keys=base)[key]
    set_attr(model.weight)
    return before, step_state(model, opt, [], base_keys=base)[key]


# -- R54c-1: a user torch object under a parameter's creation key is skipped ----------------------

@pytest.mark.state_modules()
def test_r54c_1_torch_size_under_a_creation_key():
    """R54c-1: ``w._nested_int_memo = torch.Size([1])`` is a step counter the real run reads;
    ``torch_internal`` calls a ``torch.Size`` torch's own (r54c_01: EQUIVALENT rc 0, 60.5 s;
    truth w0 0.0058 at step 2)."""
    before, after = _param_text(lambda w: setattr(w, "_nested_int_memo", torch.Size([1])))
    assert after != before


@pytest.mark.state_modules()
def test_r54c_2_plain_tensor_as_constant():
    """R54c-2: ``w.constant = torch.from_numpy(...)`` (a plain tensor, not the fake mode's)
    set after the first step is a step counter (r54c_02: EQUIVALENT rc 0, 38.1 s)."""
    before, after = _param_text(
        lambda w: setattr(w, "constant", torch.from_numpy(np.zeros((2, 2), np.float32))))
    assert after != before


@pytest.mark.state_modules()
def test_r54c_1_control_an_int_under_a_creation_key():
    """Control (R54b-2's fix): an ``int`` under ``_nested_int_memo`` is in the text."""
    before, after = _param_text(lambda w: setattr(w, "_nested_int_memo", 1))
    assert after != before


@pytest.mark.state_modules()
def test_r54c_control_a_user_key_holding_a_size():
    """Control: a ``torch.Size`` under a key that is not a creation key is in the text."""
    before, after = _param_text(lambda w: setattr(w, "count", torch.Size([1])))
    assert after != before


# -- R54c-3: a held tensor made to share a goal's storage is unseen (latent) ----------------------

_SET_DATA = torch._C.TensorBase.data.__set__  # noqa: SLF001 -- the C setter (no aten op)


def test_r54c_3_held_tensor_aliasing_a_goal():
    """R54c-3: a held 2x2 zero tensor C pointed at a goal's storage through the C setter of
    ``.data`` under ``DisableTorchFunction`` (no version bump) kept its text while only held
    tensors' storages were numbered; the goals' storages read as ``goal:<name>`` now. A prove
    of r54c_04 fails in the capture (rc 3)."""
    from spec_lang.torch_frontend.step_state import _Encoder, goal_storages

    g, c = torch.zeros(2, 2), torch.zeros(2, 2)

    def text() -> str:
        enc = _Encoder({}, frozenset({id(g)}), goal_storages=goal_storages([("G", g)]))
        return enc.enc({"C": c, "G": g})

    before = text()
    assert "goal:" not in before
    with torch._C.DisableTorchFunction():  # noqa: SLF001
        _SET_DATA(c, g)
    assert c.untyped_storage()._cdata == g.untyped_storage()._cdata  # noqa: SLF001
    after = text()
    assert after != before and "sgoal:G" in after


def test_r54c_3_goal_storages_reach_a_wrapper_subclass_inner_tensors():
    """A wrapper subclass goal (a DTensor) has no storage of its own: its inner tensors' (a
    DTensor's local shard) are the goal's, through ``__tensor_flatten__``; a held view of one
    reads as the goal, an unrelated tensor by its number."""
    from torch.testing._internal.two_tensor import TwoTensor

    from spec_lang.torch_frontend.held_storage import goal_storages, storage_no

    a, b = torch.ones(3), torch.zeros(3)
    goals = goal_storages([("w", TwoTensor(a, b))])
    assert storage_no(b[1:], goals) == "goal:w"
    assert storage_no(a, goals) == "goal:w"
    other = torch.ones(3)
    assert storage_no(other, goals).startswith("@") and storage_no(other) == storage_no(other[1:])


# -- the plans -------------------------------------------------------------------------------------

def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r54c_01_torch_size_counter_not_equivalent():
    assert _prove("r54c_01_param_fake_key_torch_size_wrong.py") != 0


@pytest.mark.slow
def test_r54c_02_constant_counter_not_equivalent():
    assert _prove("r54c_02_param_constant_set_wrong.py") != 0


@pytest.mark.slow
def test_r54c_03_adam_state_constant_unknown():
    """A plain tensor as ``constant`` of Adam's ``exp_avg`` (a goal): UNKNOWN (rc 2, 65.9 s)."""
    assert _prove("r54c_03_adam_state_constant_wrong.py") == 2
