"""Adversarial round 55a (``tests/adversarial/ATTEMPTS.md``, "Round 55a"): c3b41a7 (a
parameter's creation keys skipped only while they hold the very object recorded at creation)
and ebbeed0 (a held tensor on a goal's storage reads as ``goal:<name>``, R54c-3).

Plans in ``plans/round55a/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``*_wrong`` plan differs from the single-device run at step 2: w0 0.0058, SGD). The fast
tests call ``step_state`` / ``_Encoder`` directly; the slow ones prove the plans.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from tests.adversarial.param_texts import KEY  # noqa: F401
from tests.adversarial.param_texts import param_texts as _param_texts

ROUND = Path(__file__).resolve().parent / "plans" / "round55a"
_SET_DATA = torch._C.TensorBase.data.__set__  # noqa: SLF001 -- the C setter (no aten op)


# -- R55a-1: a carried mark is a "creation key": mutated in place, unseen ------------------------

@pytest.mark.state_modules()
def test_r55a_1_carried_list_mark_mutated_in_place():
    """R55a-1: ``capture`` recorded ``base_keys`` after ``param_attrs.carried`` set the user's
    marks, so ``w.mark = []`` (set in ``parallelize``) was a creation key holding the recorded
    list and ``mark.append(1)`` in the step was unseen (r55a_01: EQUIVALENT rc 0, 48.7 s).
    Fixed on adv/55a: ``base_keys`` is recorded before the marks (here: before ``setup``)."""
    from spec_lang.torch_frontend.step_state import step_state

    model = torch.nn.Linear(2, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = model.weight
    base = {id(w): dict(vars(w))}     # as capture.py now records it: before the marks
    w.mark = []
    before = step_state(model, opt, [], base_keys=base)[KEY]
    w.mark.append(1)
    assert step_state(model, opt, [], base_keys=base)[KEY] != before


@pytest.mark.state_modules()
def test_r55a_1_control_mark_replaced():
    """Control: a mark replaced by another list (not the recorded object) is in the text."""
    before, after = _param_texts(lambda w: setattr(w, "mark", []),
                                 lambda w: setattr(w, "mark", [1]))
    assert after != before


# -- R55a-2: the recorded fake mode's attributes are not read ------------------------------------

@pytest.mark.state_modules()
def test_r55a_2_attribute_written_into_the_recorded_fake_mode():
    """R55a-2: ``vars(w).setdefault("fake_mode", ns).steps_seen += 1`` writes into the very
    FakeTensorMode the tracer recorded under ``fake_mode`` (r55a_02: EQUIVALENT rc 0, 55.1 s)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    before, after = _param_texts(lambda w: setattr(w, "fake_mode", FakeTensorMode()),
                                 lambda w: setattr(w.fake_mode, "steps_seen", 1))
    assert after != before


@pytest.mark.state_modules()
def test_r55a_2_private_list_in_the_recorded_fake_mode_mutated_in_place():
    """R55a-2, the lead's variant: a private list the user keeps on the recorded fake mode,
    appended to (not a public plain attribute): read, as every attribute a fresh mode lacks;
    an immutable creation value (the fake device) is still skipped, a held fake tensor's mode
    is read too."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from spec_lang.torch_frontend.step_state import _Encoder

    fm = FakeTensorMode()
    fm._seen = []  # noqa: SLF001
    before, after = _param_texts(lambda w: setattr(w, "fake_mode", fm),
                                 lambda w: w.fake_mode._seen.append(1))  # noqa: SLF001
    assert after != before
    with fm:
        held = torch.empty(2)
    text = _Encoder({}, frozenset()).enc(held)
    fm._seen.append(2)  # noqa: SLF001
    assert _Encoder({}, frozenset()).enc(held) != text


# -- R55a-3: a held tensor moved to a fresh storage of its own -----------------------------------

def test_r55a_3_held_tensor_moved_to_a_fresh_storage():
    """R55a-3: ``storage_no`` numbers storages in the order one pass meets them, so a held
    tensor pointed (C setter of ``.data``, no version bump) at a fresh storage with the same
    bytes and geometry keeps its text; the next step can read ``untyped_storage()._cdata``
    against an int it kept (r55a_05: EQUIVALENT rc 0, 51.4 s)."""
    from spec_lang.torch_frontend.step_state import _Encoder

    c = torch.zeros(2, 2)
    before = _Encoder({}, frozenset()).enc({"C": c})
    old = c.untyped_storage()._cdata  # noqa: SLF001
    with torch._C.DisableTorchFunction():  # noqa: SLF001
        _SET_DATA(c, torch.zeros(2, 2))
    assert c.untyped_storage()._cdata != old  # noqa: SLF001
    assert _Encoder({}, frozenset()).enc({"C": c}) != before


def test_r55a_3_control_aliasing_another_held_tensor():
    """Control (R54b-1's fix): C pointed at another held tensor's storage changes the text."""
    from spec_lang.torch_frontend.step_state import _Encoder

    c, d = torch.zeros(2, 2), torch.zeros(2, 2)
    before = _Encoder({}, frozenset()).enc({"C": c, "D": d})
    with torch._C.DisableTorchFunction():  # noqa: SLF001
        _SET_DATA(c, d)
    assert _Encoder({}, frozenset()).enc({"C": c, "D": d}) != before


# -- R54c-3's fix (ebbeed0) ------------------------------------------------------------------------

def _held_module_text(model, c) -> str:
    from spec_lang.torch_frontend.step_state import step_state

    mod = types.ModuleType("r55a_user")
    mod.C = c
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return step_state(model, opt, [mod])["the global C of r55a_user"]   # (a digest)


@pytest.mark.state_modules()
def test_r54c_3_fix_held_tensor_on_a_parameter_storage_in_step_state():
    """ebbeed0 through ``step_state``: C pointed at the weight's storage reads as its goal."""
    model = torch.nn.Linear(2, 2, bias=False)
    c = torch.zeros(2, 2)
    before = _held_module_text(model, c)
    with torch._C.DisableTorchFunction():  # noqa: SLF001
        _SET_DATA(c, model.weight.detach())
    after = _held_module_text(model, c)
    assert after != before


def _buffer_case() -> tuple[str, str]:
    model = torch.nn.Linear(2, 2, bias=False)
    model.register_buffer("run", torch.zeros(2, 2))
    c = torch.zeros(2, 2)
    before = _held_module_text(model, c)
    with torch._C.DisableTorchFunction():  # noqa: SLF001
        _SET_DATA(c, model.run)
    return before, _held_module_text(model, c)


@pytest.mark.state_modules()
def test_r55a_4_held_tensor_on_a_buffer_storage():
    """R55a-4: a held tensor pointed at a buffer's storage keeps its text: ``step_state``
    passes parameters, grads and optimizer state to ``goal_storages``, not the buffers (read
    by name, never numbered), so C is still the first storage met (r55a_06: EQUIVALENT rc 0,
    46.1 s)."""
    before, after = _buffer_case()
    assert after != before


# -- the plans -------------------------------------------------------------------------------------

def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r55a_01_carried_mark_counter_not_equivalent():
    """Fixed on adv/55a (``capture.py``: ``base_keys`` before the marks): UNKNOWN."""
    assert _prove("r55a_01_carried_mark_list_mutated_wrong.py") != 0


@pytest.mark.slow
def test_r55a_02_fake_mode_counter_not_equivalent():
    assert _prove("r55a_02_fake_mode_attr_counter_wrong.py") != 0


@pytest.mark.slow
def test_r55a_04_held_alias_of_goal_unknown():
    """R54c-3 in a prove (C made in ``build_optimizer``: fake, like the goals): UNKNOWN rc 2,
    40.1 s (at f2d9e04, before ebbeed0: EQUIVALENT rc 0, 49.9 s)."""
    assert _prove("r55a_04_fake_held_alias_of_goal_wrong.py") == 2


@pytest.mark.slow
def test_r55a_05_fresh_storage_counter_not_equivalent():
    assert _prove("r55a_05_held_tensor_fresh_storage_wrong.py") != 0


@pytest.mark.slow
def test_r55a_06_buffer_alias_counter_not_equivalent():
    assert _prove("r55a_06_held_alias_of_buffer_wrong.py") != 0
