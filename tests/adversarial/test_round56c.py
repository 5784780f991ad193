"""Adversarial round 56c (``tests/adversarial/ATTEMPTS.md``, "Round 56c"): 4915d35
(``process_state.identity_text`` / ``release_kept`` / ``_KEPT``, ``_data_text``,
``_global_text``, ``dunder_text``: R56b-2 / R56b-3's fixes; ``styles.styled_module``: message
only).

Plans in ``plans/round56c/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``_wrong`` plan doubles its gradients from the second step on). The fast tests call
``process_state`` / ``step_state`` / ``styles`` directly; the slow ones prove the plans.
"""

from __future__ import annotations

import colorsys
import json
import signal
import types
import weakref
from pathlib import Path

import pytest

from tests.adversarial.state_diff import prove as _prove

ROUND = Path(__file__).resolve().parent / "plans" / "round56c"


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


class _Text(str):
    """A string that can carry attributes."""


class _Int(int):
    """An int that can carry attributes."""


def _text(n: int) -> _Text:
    s = _Text("k")
    s.n = n
    return s


# -- R56c-1: a data subclass's own attributes (other modules, import-system entries) ----------

@pytest.mark.state_modules("json")
def test_r56c_1_str_subclass_global_rebound_with_other_attribute():
    """``json.r56c = _Text("k")`` with ``n = 1``, rebound to another ``_Text("k")`` with
    ``n = 2`` (r56c_01): a plain object in its place is read by identity and own attributes
    (R56a-3); the string is read by ``_data_text`` alone: unseen."""
    json.r56c = _text(1)
    diff = _changes(lambda: setattr(json, "r56c", _text(2)), _pop(json, "r56c"))
    assert diff == ["the module json"], diff


@pytest.mark.state_modules("json", "signal")
def test_r56c_1_data_subclass_attribute_in_place():
    """An int attribute of an int-subclass global set in place; the same on an ``IntEnum``
    member the standard library holds (``signal.SIGINT``): each unseen (a plain object's
    int attribute is read by value: the control below)."""
    json.r56c = _Int(5)
    json.r56c.n = 1
    unseen = []
    try:
        if _changes(lambda: setattr(json.r56c, "n", 2), lambda: None) != ["the module json"]:
            unseen.append("int subclass")
        if _changes(lambda: setattr(signal.SIGINT, "r56c", 2),
                    lambda: vars(signal.SIGINT).pop("r56c", None)) != ["the module signal"]:
            unseen.append("signal.SIGINT")
    finally:
        vars(json).pop("r56c", None)
    assert unseen == [], unseen


@pytest.mark.state_modules("colorsys")
def test_r56c_1_dunder_str_subclass_other_and_user_module():
    """``colorsys.__doc__`` and the train file's own ``__doc__`` a ``_Text`` rebound to an
    equal one with another attribute (``dunder_text``): unseen in both."""
    import torch

    from spec_lang.torch_frontend.step_state import state_changes, step_state
    saved = colorsys.__doc__
    colorsys.__doc__ = _text(1)

    def undo():
        colorsys.__doc__ = saved
    other = _changes(lambda: setattr(colorsys, "__doc__", _text(2)), undo)
    mod = types.ModuleType("r56c_user")
    mod.__file__ = str(ROUND / "r56c_01_counter_in_str_subclass_global_attribute_wrong.py")
    mod.__doc__ = _text(1)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = step_state(model, opt, [mod])
    mod.__doc__ = _text(2)
    user = sorted(k for k in state_changes(before, step_state(model, opt, [mod]))
                  if "r56c_01" in k)
    assert (other, user) == (["the module colorsys"],
                             ["the global __doc__ of " + Path(mod.__file__).name]), (other, user)


class _Plain:
    pass


@pytest.mark.state_modules("json")
def test_r56c_control_plain_object_int_attribute_seen():
    """Control: a plain object's own int attribute, set in place, is read by value."""
    json.r56c = _Plain()
    json.r56c.n = 1
    diff = _changes(lambda: setattr(json.r56c, "n", 2), _pop(json, "r56c"))
    assert diff == ["the module json"], diff


@pytest.mark.state_modules("json")
def test_r56c_control_data_subclass_value_seen():
    """Control: a str subclass's value (by ``str.__repr__``) and an int's are read."""
    json.r56c = _text(1)
    diff = _changes(lambda: setattr(json, "r56c", _Text("kk")), _pop(json, "r56c"))
    json.r56c = 1
    diff2 = _changes(lambda: setattr(json, "r56c", 2), _pop(json, "r56c"))
    assert (diff, diff2) == (["the module json"], ["the module json"]), (diff, diff2)


# -- R56c-2: functions, classes and module objects another module holds: named only -----------

def _make(k):
    return lambda: k


def _class(k):
    return type("R56cClass", (), {"n": k})


def _module(k):
    m = types.ModuleType("r56c")
    m.n = k
    return m


@pytest.mark.parametrize("make", [_make, _class, _module], ids=["closure", "class", "module"])
@pytest.mark.state_modules("json")
def test_r56c_2_named_global_rebound(make):
    """``json.r56c`` rebound to another closure of the same code (r56c_02), another class of
    the same name, another module object of the same name not in ``sys.modules`` (r56c_03):
    ``_global_text`` returns ``_ident`` (code / name) for each: unseen."""
    json.r56c = make(1)
    diff = _changes(lambda: setattr(json, "r56c", make(2)), _pop(json, "r56c"))
    assert diff == ["the module json"], diff


@pytest.mark.state_modules("json")
def test_r56c_2_function_defaults_and_attribute_in_place():
    """A function global's ``__defaults__`` and an attribute of it set in place: unseen."""
    def f(k=1):
        return k
    json.r56c = f
    unseen = []
    try:
        if _changes(lambda: setattr(f, "__defaults__", (2,)), lambda: None) \
                != ["the module json"]:
            unseen.append("__defaults__")
        if _changes(lambda: setattr(f, "n", 2), lambda: None) != ["the module json"]:
            unseen.append("attribute")
    finally:
        vars(json).pop("r56c", None)
    assert unseen == [], unseen


# -- R56c-3: an int over the conversion limit crashes the fingerprint (minor, not new) --------

@pytest.mark.state_modules("colorsys")
def test_r56c_3_big_int_global_does_not_crash():
    """``colorsys.r56c = 10 ** 5000`` (a library's constant): ``_data_text`` calls
    ``int.__repr__``, which raises ``ValueError`` (``sys.get_int_max_str_digits``): the capture
    fails (no verdict, rc != 0), the right plan is not proved."""
    from spec_lang.torch_frontend.process_state import _process_state, release_kept

    colorsys.r56c = 10 ** 5000
    try:
        state = _process_state([], [])
    finally:
        vars(colorsys).pop("r56c", None)
        release_kept()
    assert "the module colorsys" in state


# -- identity_text / release_kept (R56b-2's fix): controls -------------------------------------

@pytest.mark.state_modules("json")
def test_r56c_control_kept_until_compared_and_released():
    """An object named by identity stays alive after the step drops it, until
    ``state_changes`` has compared; its finalizer runs at the release, after the entry was
    already reported changed."""
    from spec_lang.torch_frontend.process_state import _KEPT, _process_state
    from spec_lang.torch_frontend.step_state import state_changes

    ran = []
    json.r56c = _Plain()
    ref = weakref.ref(json.r56c)
    weakref.finalize(json.r56c, ran.append, "finalized")
    before = _process_state([], [])
    json.r56c = None
    alive_after_drop = ref() is not None
    try:
        after = _process_state([], [])
        ran_before_compare = list(ran)
        changed = sorted(k for k in state_changes(before, after) if k == "the module json")
    finally:
        vars(json).pop("r56c", None)
    assert (alive_after_drop, ran_before_compare, changed, ran, len(_KEPT), ref()) == (
        True, [], ["the module json"], ["finalized"], 0, None)


# -- styles.styled_module: message only --------------------------------------------------------

def test_r56c_4_styled_module_calls_no_submodule_override():
    """R56b-4's fix calls ``nn.Module.named_modules(model)``, which recurses through each
    submodule's ``named_modules``: a submodule's override is still called (message only)."""
    import torch

    from spec_lang.torch_frontend.styles import styled_module
    called = []

    class M(torch.nn.Linear):
        def named_modules(self, *a, **k):
            called.append(1)
            return super().named_modules(*a, **k)
    styled_module(RuntimeError("x"), torch.nn.Sequential(M(2, 2)), {})
    assert called == []


# -- the plans ----------------------------------------------------------------------------------



@pytest.mark.slow
def test_r56c_01_str_subclass_attribute_counter_not_equivalent():
    assert _prove(ROUND / "r56c_01_counter_in_str_subclass_global_attribute_wrong.py") != 0


@pytest.mark.slow
def test_r56c_02_function_closure_counter_not_equivalent():
    assert _prove(ROUND / "r56c_02_counter_in_stdlib_function_global_closure_wrong.py") != 0


@pytest.mark.slow
def test_r56c_03_module_object_counter_not_equivalent():
    assert _prove(ROUND / "r56c_03_counter_in_module_object_global_wrong.py") != 0
