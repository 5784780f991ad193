"""Adversarial round 55c (``tests/adversarial/ATTEMPTS.md``, "Round 55c"): b334062 (a held
tensor's storage by its address, no reference kept: R55b-4's fix; a real held tensor's data
pointer, shared and resizable flags: R55b-2's fix) and 2f244e4 (the trace's FakeTensorMode and
its converters read in full but for their memo tables and conversion counts: R55b-1's fix).

Plans in ``plans/round55c/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``step_state`` / ``_Encoder`` directly; the slow ones prove the plans.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.adversarial.param_texts import KEY  # noqa: F401
from tests.adversarial.param_texts import param_texts as _param_texts

ROUND = Path(__file__).resolve().parent / "plans" / "round55c"
ROUND55B = Path(__file__).resolve().parent / "plans" / "round55b"


def _enc(v) -> str:
    from spec_lang.torch_frontend.step_state import _Encoder

    return _Encoder({}, frozenset()).enc({"C": v})


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


# -- R55c-1: a gradient hook registered on a held tensor ---------------------------------------

def test_r55c_1_hook_on_held_tensor_changes_its_text():
    """R55c-1: ``C.register_hook`` keeps the hook in C's autograd meta (``C._backward_hooks``),
    not in ``vars(C)``; the held tensor's text was unchanged (r55c_01: EQUIVALENT rc 0, 72.8 s).
    Fixed on adv/55c: ``h=`` (both hook dicts) in the held tensor's text."""
    c = torch.zeros(4, requires_grad=True)
    before = _enc(c)
    c.register_hook(lambda g: g)
    assert c._backward_hooks                                        # noqa: SLF001
    assert _enc(c) != before


def test_r55c_1_post_accumulate_hook_on_held_tensor():
    """R55c-1, variant: ``register_post_accumulate_grad_hook`` on a held leaf."""
    c = torch.zeros(4, requires_grad=True)
    before = _enc(c)
    c.register_post_accumulate_grad_hook(lambda t: None)
    assert _enc(c) != before


def test_r55c_1_control_grad_of_held_tensor_is_read():
    """Control: a held tensor's ``.grad`` set by the step is in its text."""
    c = torch.zeros(4, requires_grad=True)
    before = _enc(c)
    c.grad = torch.ones(4)
    assert _enc(c) != before


# -- R55c-2: a counter in the conversion counts 2f244e4 skips by name ---------------------------

@pytest.mark.xfail(strict=True, reason="R55c-2 open: MetaConverter.arg_cnt skipped by name")
@pytest.mark.state_modules()
def test_r55c_2_sentinel_in_meta_converter_arg_cnt():
    """R55c-2: ``arg_cnt`` of the recorded mode's MetaConverter is skipped (the conversions
    change it); a sentinel the step writes there (-1000) is a step mark (r55c_02: EQUIVALENT
    rc 0)."""
    before, after = _param_texts(
        lambda w: setattr(w, "fake_mode", _fake_mode()),
        lambda w: setattr(w.fake_mode.fake_tensor_converter.meta_converter, "arg_cnt", -1000))
    assert after != before


@pytest.mark.xfail(strict=True, reason="R55c-2 open: the describer is skipped as a whole")
@pytest.mark.state_modules()
def test_r55c_2_attribute_on_meta_converters_describer():
    """R55c-2, variant: the whole ``describer`` is skipped; a user attribute put on it."""
    before, after = _param_texts(
        lambda w: setattr(w, "fake_mode", _fake_mode()),
        lambda w: setattr(w.fake_mode.fake_tensor_converter.meta_converter.describer,
                          "steps_seen", 1))
    assert after != before


@pytest.mark.state_modules()
def test_r55c_2_control_other_converter_attribute_read():
    """Control (2f244e4): an attribute of the converter outside the skipped names is read."""
    before, after = _param_texts(
        lambda w: setattr(w, "fake_mode", _fake_mode()),
        lambda w: setattr(w.fake_mode.fake_tensor_converter.meta_converter, "steps_seen", 1))
    assert after != before


# -- R55c-3: a counter held only by a torch C object (``torch.futures.Future``) ----------------

def test_r55c_3_counter_in_future_value():
    """R55c-3: a ``torch.futures.Future`` is a torch object without attributes, read as its
    type only: the list it holds as its value is a counter the text never shows (r55c_03:
    EQUIVALENT rc 0)."""
    fut = torch.futures.Future()
    fut.set_result([0])
    before = _enc(fut)
    fut.value()[0] += 1
    assert _enc(fut) != before


def test_r55c_3_future_completed_by_the_step():
    """R55c-3, variant: ``set_result`` by the step (``done()`` turns True)."""
    fut = torch.futures.Future()
    before = _enc(fut)
    fut.set_result(1)
    assert _enc(fut) != before


# -- R55c-4: a storage freed and a fresh one made at its address --------------------------------

def _set_data(c, t) -> None:
    with torch._C.DisableTorchFunction():                               # noqa: SLF001
        torch._C.TensorBase.data.__set__(c, t)                          # noqa: SLF001


def test_r55c_4_fresh_storage_at_the_freed_address():
    """R55c-4: a held meta tensor moved to an empty storage and then to a fresh one, which
    torch allocates at the freed storage's address: same ``_cdata``, same text, but the
    storage's Python object (kept alive by torch as long as the storage) is another, and
    ``id()`` of it, an int kept before the step, tells them apart (r55c_04)."""
    c = torch.zeros(4, device="meta")
    sid = id(c.untyped_storage())
    before = _enc(c)
    cdata = c.untyped_storage()._cdata                                  # noqa: SLF001
    _set_data(c, torch.empty(0, device="meta"))
    _set_data(c, torch.zeros(4, device="meta"))
    if c.untyped_storage()._cdata != cdata:                             # noqa: SLF001
        pytest.skip("torch did not reuse the address this time")
    if id(c.untyped_storage()) == sid:
        # (R55e-5: 4 in 300 tries) both identities reused: a next step that keeps no
        # reference to the old storage cannot tell the two apart either (one it keeps keeps
        # the old storage alive, and a weak one is fingerprinted itself)
        pytest.skip("torch reused the storage object's address too: nothing tells them apart")
    assert _enc(c) != before


def test_r55c_4_control_storage_python_attribute_read():
    """Control: an attribute set on a held tensor's storage object is in its text."""
    c = torch.zeros(4)
    before = _enc(c)
    c.untyped_storage().tag = 1
    assert _enc(c) != before


def test_r55c_4_control_fresh_storage_while_old_alive():
    """Control (b334062): a move to a fresh storage made while the old one lives changes the
    text (another address)."""
    c = torch.zeros(4, device="meta")
    before = _enc(c)
    _set_data(c, torch.zeros(4, device="meta"))
    assert _enc(c) != before


# -- R55c-5: state put on the capture's own guard function (``_ours`` skips it) -----------------

def _mode_with_guard(w) -> None:
    from spec_lang.torch_frontend.own_guards import capture_own

    def guard(*a, **k):
        return None

    fm = _fake_mode()
    fm.dispatch = capture_own(guard)
    w.fake_mode = fm


@pytest.mark.state_modules()
def test_r55c_5_kwdefaults_of_the_capture_guard():
    """R55c-5: ``_ours`` skips the mode's ``dispatch`` while it is the capture's function with
    an empty ``__dict__``; ``__kwdefaults__`` (and ``__defaults__``, ``__annotations__``) are
    not in ``vars(f)``: a step counter there is unseen (r55c_05)."""
    before, after = _param_texts(
        _mode_with_guard,
        lambda w: setattr(w.fake_mode.dispatch, "__kwdefaults__", {"steps_seen": 1}))
    assert after != before


@pytest.mark.state_modules()
def test_r55c_5_control_attribute_of_the_capture_guard():
    """Control (2f244e4): an attribute put in the guard's ``__dict__`` makes it read."""
    before, after = _param_texts(
        _mode_with_guard, lambda w: setattr(w.fake_mode.dispatch, "steps_seen", 1))
    assert after != before


# -- R55c-6: the fake mode's ShapeEnv, a torch object read by public plain attributes only ------

def _mode_with_shape_env(w) -> None:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    w.fake_mode = _fake_mode()
    w.fake_mode.shape_env = ShapeEnv()       # as make_fx(tracing_mode="fake") makes it


@pytest.mark.xfail(strict=True, reason="R55c-6 open: a ShapeEnv's private attributes unread")
@pytest.mark.state_modules()
def test_r55c_6_private_counter_on_the_modes_shape_env():
    """R55c-6: 2f244e4 reads the mode in full, but its ``shape_env`` is another torch object:
    public plain attributes only; ``se._steps_seen += 1`` is unseen (r55c_06)."""
    before, after = _param_texts(
        _mode_with_shape_env, lambda w: setattr(w.fake_mode.shape_env, "_steps_seen", 1))
    assert after != before


@pytest.mark.xfail(strict=True, reason="R55c-6 open: a ShapeEnv's lists unread")
@pytest.mark.state_modules()
def test_r55c_6_list_of_the_modes_shape_env_appended_to():
    """R55c-6, variant: a public list of the ShapeEnv (``guards``) appended to."""
    before, after = _param_texts(
        _mode_with_shape_env, lambda w: w.fake_mode.shape_env.guards.append(1))
    assert after != before


@pytest.mark.state_modules()
def test_r55c_6_control_public_int_of_the_shape_env():
    """Control: a public int put on the ShapeEnv is read."""
    before, after = _param_texts(
        _mode_with_shape_env, lambda w: setattr(w.fake_mode.shape_env, "steps_seen", 1))
    assert after != before


# -- R55c-7: a held fake tensor's own keys, skipped whatever they hold --------------------------

def test_r55c_7_sentinel_under_a_held_fake_tensors_own_key():
    """R55c-7 (R54b-2's class on a held tensor): a held fake tensor (one ``build_optimizer``
    makes in the trace) keeps the keys of a fresh FakeTensor unread whatever they hold;
    ``vars(C)["_unique_consecutive_memo_epoch"] = -1000`` is a step mark (r55c_07)."""
    with _fake_mode():
        c = torch.zeros(4)
    before = _enc(c)
    vars(c)["_unique_consecutive_memo_epoch"] = -1000
    assert _enc(c) != before


def test_r55c_7_control_other_attribute_of_a_held_fake_tensor():
    """Control: another attribute put on a held fake tensor is read."""
    with _fake_mode():
        c = torch.zeros(4)
    before = _enc(c)
    c.steps_seen = 1
    assert _enc(c) != before


# -- the plans -------------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r55c_01_held_tensor_hook_not_equivalent():
    """Fixed on adv/55c (EQUIVALENT rc 0, 72.8 s before the fix)."""
    assert _prove(ROUND / "r55c_01_held_tensor_hook_added_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R55c-2 open")
def test_r55c_02_meta_converter_arg_cnt_not_equivalent():
    assert _prove(ROUND / "r55c_02_meta_converter_arg_cnt_sentinel_wrong.py") != 0


@pytest.mark.slow
def test_r55c_03_future_counter_not_equivalent():
    assert _prove(ROUND / "r55c_03_counter_in_torch_future_wrong.py") != 0


@pytest.mark.slow
def test_r55c_05_guard_kwdefaults_not_equivalent():
    """R55d-1's fix: the guard checked as it is taken off: refused, exit 3 (25.8 s)."""
    assert _prove(ROUND / "r55c_05_capture_dispatch_kwdefaults_wrong.py") == 3


@pytest.mark.slow
def test_r55b_01_and_04_not_equivalent_now():
    """b334062 / 2f244e4 fix R55b-1 and R55b-4: both plans UNKNOWN (rc 2) now."""
    assert _prove(ROUND55B / "r55b_01_fake_mode_converter_counter_wrong.py") != 0
    assert _prove(ROUND55B / "r55b_04_held_storage_weakref_count_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R55c-6 open")
def test_r55c_06_shape_env_counter_not_equivalent():
    assert _prove(ROUND / "r55c_06_fake_mode_shape_env_counter_wrong.py") != 0


@pytest.mark.slow
def test_r55c_07_held_fake_tensor_fake_key_not_equivalent():
    assert _prove(ROUND / "r55c_07_held_fake_tensor_fake_key_wrong.py") != 0
