"""Adversarial round 55b (``tests/adversarial/ATTEMPTS.md``, "Round 55b"): 799b663 (a held
tensor's storage numbered once per process, weakly: R55a-3's fix) and 2937b28 (a parameter's
recorded creation value skipped only when immutable; the recorded FakeTensorMode read: its
public plain attributes and every attribute a fresh mode lacks, the capture's guards excepted:
R55a-2's fix; buffers' storages named: R55a-4's fix).

Plans in ``plans/round55b/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``*_wrong`` plan differs from the single-device run at step 2: w0 0.0058, SGD). The fast
tests call ``step_state`` / ``_Encoder`` directly; the slow ones prove the plans.
"""

from __future__ import annotations

from pathlib import Path
import types

import pytest
import torch

from tests.adversarial.param_texts import KEY  # noqa: F401
from tests.adversarial.param_texts import param_texts as _param_texts

ROUND = Path(__file__).resolve().parent / "plans" / "round55b"


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


# -- R55b-1: a counter inside an attribute a fresh fake mode already has ------------------------

@pytest.mark.state_modules()
def test_r55b_1_counter_on_the_recorded_fake_modes_converter():
    """R55b-1: 2937b28 reads the recorded fake mode's public plain attributes and the ones a
    fresh mode lacks; ``fake_tensor_converter`` is neither (a fresh mode has it, it is an
    object): ``fm.fake_tensor_converter.steps_seen += 1`` is unseen (r55b_01: EQUIVALENT rc 0,
    57.9 s)."""
    before, after = _param_texts(
        lambda w: setattr(w, "fake_mode", _fake_mode()),
        lambda w: setattr(w.fake_mode.fake_tensor_converter, "steps_seen", 1))
    assert after != before


@pytest.mark.state_modules()
def test_r55b_1_list_of_the_recorded_fake_mode_appended_to():
    """R55b-1, variant: ``_stack_trace`` (a list a fresh mode has, debugging only) appended to."""
    before, after = _param_texts(lambda w: setattr(w, "fake_mode", _fake_mode()),
                                 lambda w: w.fake_mode._stack_trace.append(1))  # noqa: SLF001
    assert after != before


def test_r55b_1_held_fake_tensors_mode_converter():
    """R55b-1 through a held fake tensor (its ``fake_mode`` is read since 2937b28)."""
    from spec_lang.torch_frontend.step_state import _Encoder

    fm = _fake_mode()
    with fm:
        held = torch.empty(2)
    text = _Encoder({}, frozenset()).enc(held)
    fm.fake_tensor_converter.steps_seen = 1
    assert _Encoder({}, frozenset()).enc(held) != text


@pytest.mark.state_modules()
def test_r55b_1_control_public_int_counter_of_the_mode():
    """Control: the mode's public int counter (``nt_tensor_id_counter``) is read."""
    before, after = _param_texts(lambda w: setattr(w, "fake_mode", _fake_mode()),
                                 lambda w: setattr(w.fake_mode, "nt_tensor_id_counter", 7))
    assert after != before


@pytest.mark.state_modules()
def test_r55b_1_control_immutable_creation_value_skipped():
    """Control (2937b28's design): the recorded fake device, an immutable value, stays skipped
    while it is the recorded object; a replaced one is read."""
    dev = torch.device("cpu")
    before, after = _param_texts(lambda w: setattr(w, "fake_device", dev),
                                 lambda w: None)
    assert after == before
    before, after = _param_texts(lambda w: setattr(w, "fake_device", dev),
                                 lambda w: setattr(w, "fake_device", torch.device("meta")))
    assert after != before


# -- R55b-2: a held tensor's storage changes in place: same StorageImpl, same number ----------

def test_r55b_2_held_tensor_moved_to_shared_memory():
    """R55b-2: ``C.share_memory_()`` swaps the data of C's storage for a shared copy in place:
    same StorageImpl (``_cdata``, so the same 799b663 number), same bytes, geometry and version;
    ``C.is_shared()`` and ``C.data_ptr()`` change, and the next step can read either."""
    from spec_lang.torch_frontend.step_state import _Encoder

    c = torch.zeros(2, 2)
    before = _Encoder({}, frozenset()).enc({"C": c})
    ptr = c.data_ptr()
    c.share_memory_()
    assert c.is_shared() and c.data_ptr() != ptr
    assert _Encoder({}, frozenset()).enc({"C": c}) != before


def test_r55b_2_control_number_kept_across_passes():
    """Control (799b663): a held tensor left alone keeps its text across two passes, and a
    freed storage's address reused by a fresh one gets a new number."""
    from spec_lang.torch_frontend.held_storage import storage_no

    c = torch.zeros(3)
    first = storage_no(c)
    assert storage_no(c) == first
    d = torch.zeros(3)
    assert storage_no(d) != first


# -- R55b-3: the fingerprint itself made a held tensor's storage not resizable ----------------

def test_r55b_3_fingerprint_leaves_storage_resizable():
    """R55b-3: ``data_digest`` took ``.numpy()`` of the held tensor itself, which marks its
    storage not resizable: the trace's step saw ``resizable() == False``, every real run
    ``True`` (r55b_03: EQUIVALENT rc 0, 19.6 s). Fixed on adv/55b (``.clone()`` before
    ``.numpy()``): r55b_03 NOT EQUIVALENT rc 1, 18.6 s."""
    from spec_lang.torch_frontend.step_state import _Encoder

    c = torch.zeros(4)
    assert c.untyped_storage().resizable()
    _Encoder({}, frozenset()).enc({"C": c})
    assert c.untyped_storage().resizable()


# -- R55b-4: the fingerprint's weak reference to a held tensor's storage is visible -------------

def test_r55b_4_fingerprint_leaves_no_weak_reference():
    """R55b-4 (new in 799b663): ``_storage_number`` keeps a weak reference to every held
    tensor's storage object in ``_SEEN``; ``weakref.getweakrefcount(C.untyped_storage())`` is
    0 in every real run and 1 in the trace's step after the first fingerprint (r55b_04:
    EQUIVALENT rc 0, 20.0 s)."""
    import weakref

    from spec_lang.torch_frontend.step_state import _Encoder

    c = torch.zeros(4)
    assert weakref.getweakrefcount(c.untyped_storage()) == 0
    _Encoder({}, frozenset()).enc({"C": c})
    assert weakref.getweakrefcount(c.untyped_storage()) == 0


# -- the plans -------------------------------------------------------------------------------------

def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r55b_01_converter_counter_not_equivalent():
    assert _prove("r55b_01_fake_mode_converter_counter_wrong.py") != 0


@pytest.mark.slow
def test_r55b_03_resizable_flag_not_equivalent():
    """Fixed on adv/55b: NOT EQUIVALENT rc 1 (EQUIVALENT rc 0 before the fix)."""
    assert _prove("r55b_03_held_tensor_resizable_flag_wrong.py") == 1


@pytest.mark.slow
def test_r55b_04_weakref_count_not_equivalent():
    assert _prove("r55b_04_held_storage_weakref_count_wrong.py") != 0


@pytest.mark.slow
def test_r55b_02_share_memory_refused():
    """R55b-2 in a prove: the capture cannot open shared memory (rc 3, 16.1 s): refused."""
    assert _prove("r55b_02_held_tensor_share_memory_wrong.py") == 3
