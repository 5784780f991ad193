"""Adversarial round 56d (``tests/adversarial/ATTEMPTS.md``, "Round 56d"): c3ee224
(``process_state._global_text`` / ``object_text`` / ``dunder_text`` / ``_data_text`` /
``identity_text``: R56c-1..3's fixes; ``styles._module_names``: message only).

Plans in ``plans/round56d/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``_wrong`` plan doubles its gradients from the second step on: step 2 w0 0.0058). The
fast tests call ``process_state`` / ``step_state`` / ``styles`` directly; the slow ones prove
the plans.
"""

from __future__ import annotations

import colorsys
import json
import sys
import tempfile
import types
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round56d"


def _changes(change, undo) -> list[str]:
    """The entries ``state_changes`` reports for ``change()`` between two ``_process_state``
    fingerprints (``undo()`` after the second)."""
    from spec_lang.torch_frontend.process_state import _process_state
    from spec_lang.torch_frontend.step_state import state_changes

    before = _process_state([], [])
    change()
    try:
        after = _process_state([], [])
    finally:
        undo()
    return sorted(state_changes(before, after))


def _pop(mod, *keys):
    def undo():
        for k in keys:
            vars(mod).pop(k, None)
    return undo


def _user_changes(mod: types.ModuleType, change) -> list[str]:
    """``state_changes`` of ``step_state`` with ``mod`` as the user's module, around
    ``change()`` (the model and optimizer made before either fingerprint)."""
    import torch

    from spec_lang.torch_frontend.step_state import state_changes, step_state

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = step_state(model, opt, [mod])
    change()
    return sorted(state_changes(before, step_state(model, opt, [mod])))


def _user_module() -> types.ModuleType:
    mod = types.ModuleType("r56d_user")
    mod.__file__ = str(ROUND / "r56d_02_counter_in_train_file_global_key_format_wrong.py")
    return mod


# -- R56d-1: a non-string key in another module's namespace drops the whole module ------------

@pytest.mark.state_modules("colorsys")
def test_r56d_1_non_str_key_hides_the_module():
    """``vars(colorsys)[0] = 0`` (r56d_01): ``colorsys.r56d`` rebound 1 -> 2 is unseen."""
    vars(colorsys)[0] = 0
    colorsys.r56d = 1
    try:
        diff = _changes(lambda: setattr(colorsys, "r56d", 2), lambda: None)
    finally:
        _pop(colorsys, 0, "r56d")()
    assert diff == ["the module colorsys"], diff


def test_r56d_1_control_without_the_key():
    """Control: the same rebinding with string keys only is seen, and nothing else."""
    colorsys.r56d = 1
    diff = _changes(lambda: setattr(colorsys, "r56d", 2), _pop(colorsys, "r56d"))
    assert diff == ["the module colorsys"], diff


class _ReprKey(str):
    """A key whose ``repr`` hides its value (and counts its calls)."""

    calls = 0

    def __repr__(self) -> str:
        type(self).calls += 1
        return "'r56d'"


@pytest.mark.state_modules("colorsys")
def test_r56d_1_str_subclass_key_with_constant_repr():
    """Another module's global whose key is a ``str`` subclass with a constant ``__repr__``,
    replaced by another such key (the counter in the key's text): unseen."""
    vars(colorsys)[_ReprKey("r1")] = None

    def change():
        del vars(colorsys)["r1"]
        vars(colorsys)[_ReprKey("r2")] = None
    diff = _changes(change, _pop(colorsys, "r1", "r2"))
    assert diff == ["the module colorsys"], diff


@pytest.mark.state_modules("colorsys")
def test_r56d_1_key_repr_not_called():
    """No code of the user's runs in the fingerprint (the docstrings' promise): the key's
    ``__repr__`` is called."""
    from spec_lang.torch_frontend.process_state import _process_state

    _ReprKey.calls = 0
    vars(colorsys)[_ReprKey("r1")] = None
    try:
        _process_state([], [])
    finally:
        _pop(colorsys, "r1")()
    assert _ReprKey.calls == 0


# -- R56d-2: the train file's own global named by its key's __format__ ------------------------

class _FormatKey(str):
    def __format__(self, spec: str) -> str:
        return "r56d"


@pytest.mark.state_modules()
def test_r56d_2_user_global_key_format():
    """The train file's global ``_FormatKey("a1")`` replaced by ``_FormatKey("a2")``
    (r56d_02): no entry changes."""
    mod = _user_module()
    vars(mod)[_FormatKey("a1")] = None

    def change():
        del vars(mod)["a1"]
        vars(mod)[_FormatKey("a2")] = None
    assert _user_changes(mod, change), "unseen"


@pytest.mark.state_modules()
def test_r56d_2_control_user_global_plain_key():
    """Control: the same with plain string keys is seen (the old key gone, the new one)."""
    mod = _user_module()
    mod.a1 = None

    def change():
        del mod.a1
        mod.a2 = None
    name = "r56d_02_counter_in_train_file_global_key_format_wrong.py"
    assert _user_changes(mod, change) == [f"the global a1 of {name}",
                                          f"the global a2 of {name}"]


# -- R56d-3: a bound C method / method-wrapper global named by its qualname only ---------------

@pytest.mark.state_modules("json")
def test_r56d_3_bound_builtin_method_rebound():
    """``json.r56d = [0].append`` rebound to ``[0, 0].append`` (r56d_03): unseen."""
    json.r56d = [0].append
    diff = _changes(lambda: setattr(json, "r56d", [0, 0].append), _pop(json, "r56d"))
    assert diff == ["the module json"], diff


@pytest.mark.state_modules("json")
def test_r56d_3_method_wrapper_rebound():
    """``json.r56d = (1).__add__`` rebound to ``(2).__add__``: unseen."""
    json.r56d = (1).__add__
    diff = _changes(lambda: setattr(json, "r56d", (2).__add__), _pop(json, "r56d"))
    assert diff == ["the module json"], diff


@pytest.mark.state_modules("json")
def test_r56d_3_control_module_function_rebound():
    """Control: a C function of another module (``math.sqrt`` -> ``math.floor``) is seen."""
    import math
    json.r56d = math.sqrt
    diff = _changes(lambda: setattr(json, "r56d", math.floor), _pop(json, "r56d"))
    assert diff == ["the module json"], diff


# -- R56d-4: tempfile._name_sequence's values not read ------------------------------------------

@pytest.mark.state_modules("tempfile")
def test_r56d_4_tempfile_name_sequence_pid():
    """``tempfile._name_sequence`` replaced by a ``_RandomNameSequence`` whose ``_rng_pid`` is
    -1, then one whose ``_rng_pid`` is -2 (r56d_04): unseen."""
    old = tempfile._name_sequence  # noqa: SLF001

    def seq(pid):
        s = tempfile._RandomNameSequence()  # noqa: SLF001
        s._rng_pid = pid  # noqa: SLF001
        return s
    tempfile._name_sequence = seq(-1)  # noqa: SLF001
    try:
        diff = _changes(lambda: setattr(tempfile, "_name_sequence", seq(-2)), lambda: None)
    finally:
        tempfile._name_sequence = old  # noqa: SLF001
    assert diff == ["the module tempfile"], diff


# -- R56d-5: a NaN's payload (floats by repr) ---------------------------------------------------

def _nan(n: int) -> float:
    import struct
    return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000 | n))[0]


@pytest.mark.state_modules("colorsys")
def test_r56d_5_nan_payload_other_module():
    """``colorsys.r56d`` a NaN with payload 1, rebound to one with payload 2: unseen."""
    colorsys.r56d = _nan(1)
    diff = _changes(lambda: setattr(colorsys, "r56d", _nan(2)), _pop(colorsys, "r56d"))
    assert diff == ["the module colorsys"], diff


@pytest.mark.state_modules()
def test_r56d_5_nan_payload_user_global():
    """The train file's global a NaN, payload 1 -> 2 (r56d_05): unseen."""
    mod = _user_module()
    mod.r = _nan(1)
    assert _user_changes(mod, lambda: setattr(mod, "r", _nan(2))), "unseen"


@pytest.mark.state_modules("colorsys")
def test_r56d_5_control_nan_to_number():
    """Control: a NaN rebound to 1.0 is seen."""
    colorsys.r56d = _nan(1)
    diff = _changes(lambda: setattr(colorsys, "r56d", 1.0), _pop(colorsys, "r56d"))
    assert diff == ["the module colorsys"], diff


# -- open list (docs/torch.md: a torch module's globals other than code by type only) ---------

@pytest.mark.xfail(strict=True, reason="open: a torch module's object global read by its type")
@pytest.mark.state_modules("torch.nn.functional")
def test_r56d_open_torch_module_plain_object_rebound():
    """``torch.nn.functional.r56d`` rebound to another ``SimpleNamespace`` (``n`` 1 -> 2): the
    R56a-3 form in a torch module, named by type (docs/torch.md, stop 23)."""
    import torch.nn.functional as F

    F.r56d = types.SimpleNamespace(n=1)
    diff = _changes(lambda: setattr(F, "r56d", types.SimpleNamespace(n=2)), _pop(F, "r56d"))
    assert diff == ["torch namespace torch.nn.functional"], diff


@pytest.mark.xfail(strict=True, reason="open: a torch-named module's number global is skipped")
@pytest.mark.state_modules("torch.r56d")
def test_r56d_open_hand_made_torch_named_module_number():
    """A module made by hand, put in ``sys.modules`` as ``torch.r56d``, its global ``n`` 1 -> 2:
    neither the torch loop (numbers skipped) nor the other modules' loop (torch names
    skipped) reads it (R40b-5's hand-made modules, under a torch name)."""
    m = types.ModuleType("torch.r56d")
    m.n = 1
    sys.modules["torch.r56d"] = m
    try:
        diff = _changes(lambda: setattr(m, "n", 2), lambda: None)
    finally:
        sys.modules.pop("torch.r56d", None)
    assert diff, "unseen"


# -- styles._module_names: message only -------------------------------------------------------

def test_r56d_styles_module_names_match_named_modules():
    """Control: ``_module_names`` gives ``nn.Module.named_modules``' names (a shared module by
    its first name) and calls no override."""
    import torch

    from spec_lang.torch_frontend.styles import _module_names
    called = []

    class M(torch.nn.Linear):
        def named_modules(self, *a, **k):
            called.append(1)
            return super().named_modules(*a, **k)
    shared = M(2, 2)
    model = torch.nn.Sequential(torch.nn.Sequential(shared, M(2, 2)), shared)
    want = {id(m): n for n, m in torch.nn.Module.named_modules(model)}
    called.clear()
    assert (_module_names(model), called) == (want, [])


# -- the plans ----------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r56d_01_non_str_key_counter_not_equivalent():
    assert _prove(ROUND / "r56d_01_counter_in_module_with_non_str_key_wrong.py") != 0


@pytest.mark.slow
def test_r56d_02_user_key_format_counter_not_equivalent():
    assert _prove(ROUND / "r56d_02_counter_in_train_file_global_key_format_wrong.py") != 0


@pytest.mark.slow
def test_r56d_03_bound_method_counter_not_equivalent():
    assert _prove(ROUND / "r56d_03_counter_in_stdlib_bound_builtin_method_wrong.py") != 0


@pytest.mark.slow
def test_r56d_04_tempfile_pid_counter_not_equivalent():
    assert _prove(ROUND / "r56d_04_counter_in_tempfile_name_sequence_pid_wrong.py") != 0


@pytest.mark.slow
def test_r56d_05_nan_payload_counter_not_equivalent():
    assert _prove(ROUND / "r56d_05_counter_in_nan_payload_wrong.py") != 0


# -- the lead's last read: the optimizer's keys through ``_plain`` too --------------------------

class _Eq(str):
    def __eq__(self, other):  # noqa: D105
        return True

    def __ne__(self, other):  # noqa: D105
        return False

    __hash__ = str.__hash__


@pytest.mark.state_modules()
def test_r56d_2_optimizer_key_equal_to_everything_is_read():
    """A str-subclass key in the optimizer's ``__dict__`` whose ``__eq__`` says it is
    ``"param_groups"`` (and ``"state"``): its value changing is a change (it was skipped)."""
    import torch

    from spec_lang.torch_frontend.step_state import state_changes, step_state

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    vars(opt)[_Eq("r56d")] = 1
    before = step_state(model, opt, [])
    (key,) = [k for k in vars(opt) if type(k) is _Eq]
    vars(opt)[key] = 2
    changes = state_changes(before, step_state(model, opt, []))
    assert [k for k in changes if k.startswith("optimizer.<key")] != [], changes
