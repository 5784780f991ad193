"""Adversarial round 56a (``tests/adversarial/ATTEMPTS.md``, "Round 56a"): 7604389
(``process_state._MODULE_DUNDERS``: other modules' ``__x__`` globals read but those the import
system and ``warnings`` set, R55e-1 / R55e-2; ``own_guards._made_with`` by identity, R55e-4).

Plans in ``plans/round56a/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(every ``_wrong`` plan: step 1 w0 0.0, step 2 w0 0.0058). The fast tests call
``process_state`` / ``step_state`` / ``own_guards`` directly; the slow ones prove the plans.
"""

from __future__ import annotations

import copy
import json
import sys
import types
from pathlib import Path

import pytest

from tests.adversarial.state_diff import prove as _prove
from tests.adversarial.state_diff import state_diff as _state_diff
from tests.adversarial.state_diff import user_changes as _user_changes

ROUND = Path(__file__).resolve().parent / "plans" / "round56a"




# -- R56a-1: the excluded dunders of another module, rebound -----------------------------------

_EXCLUDED = {
    "__doc__": lambda m: m.__doc__ + ".",
    "__file__": lambda m: m.__file__ + ".",
    "__cached__": lambda m: "/tmp/r56a.pyc",
    "__package__": lambda m: "r56a",
    "__builtins__": lambda m: {"r56a": 1},
    "__warningregistry__": lambda m: {"r56a": 1},
    "__spec__": lambda m: copy.copy(m.__spec__),
}


@pytest.mark.state_modules("colorsys")
def test_r56a_1_excluded_dunder_rebound():
    """``colorsys.<key> = <another value>`` for each key (r56a_01 uses ``math.__doc__``): the
    module's entry changes (one fingerprint before, one after each change: the suite's time)."""
    import colorsys

    from spec_lang.torch_frontend.process_state import _process_state

    saved = dict(vars(colorsys))
    before = _process_state([], [])
    unseen = []
    for key in sorted(_EXCLUDED):
        setattr(colorsys, key, _EXCLUDED[key](colorsys))
        try:
            after = _process_state([], [])
        finally:
            vars(colorsys).clear()
            vars(colorsys).update(saved)
        diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if "the module colorsys" not in diff:
            unseen.append((key, diff))
    assert unseen == []


@pytest.mark.state_modules("colorsys")
def test_r56a_1_control_other_dunder_seen():
    """Control: a dunder key not in ``_MODULE_DUNDERS`` is read (R55e-1's fix)."""
    import colorsys

    diff = _state_diff(lambda: setattr(colorsys, "__r56a__", 1),
                       lambda: vars(colorsys).pop("__r56a__", None))
    assert diff == ["the module colorsys"], diff


@pytest.mark.state_modules("spec_lang.torch_frontend.storage_writes")
def test_r56a_1_guard_globals_doc():
    """``fm.dispatch.__globals__["__doc__"]`` changed (the guard's module is
    ``storage_writes``): ``check_guard`` accepts and no entry changes."""
    from spec_lang.torch_frontend import storage_writes

    g = vars(storage_writes)
    doc = g["__doc__"]
    diff = _state_diff(lambda: g.__setitem__("__doc__", doc + "."),
                       lambda: g.__setitem__("__doc__", doc))
    assert any("storage_writes" in k for k in diff), diff


# -- R56a-2: a dunder global of the train file (the user's module) -----------------------------



def _user_module() -> types.ModuleType:
    mod = types.ModuleType("r56a_user")
    mod.__file__ = str(ROUND / "r56a_02_counter_in_train_file_dunder_global_wrong.py")
    return mod


@pytest.mark.state_modules()
def test_r56a_2_user_module_dunder_global():
    """``__r56a__`` set in the train file's globals (r56a_02): no entry changes."""
    mod = _user_module()
    changes = _user_changes(mod, lambda: setattr(mod, "__r56a__", 1))
    assert changes, "unseen"


def test_r56a_2_control_user_module_plain_global():
    """Control: the same key without the dunder form is seen, and nothing else changes."""
    mod = _user_module()
    changes = _user_changes(mod, lambda: setattr(mod, "r56a", 1))
    assert list(changes) == ["the global r56a of r56a_02_counter_in_train_file_dunder_global_"
                             "wrong.py"], changes


# -- R56a-3: another module's global replaced by an object of the same type --------------------

@pytest.mark.state_modules("json")
def test_r56a_3_stdlib_global_same_type_object():
    """``json._default_encoder = JSONEncoder(indent=3)`` (r56a_03): unseen."""
    enc = json._default_encoder   # noqa: SLF001
    diff = _state_diff(lambda: setattr(json, "_default_encoder", json.JSONEncoder(indent=3)),
                       lambda: setattr(json, "_default_encoder", enc))
    assert any("json" in k for k in diff), diff


@pytest.mark.state_modules("json")
def test_r56a_3_control_stdlib_global_other_type():
    """Control: the same global replaced by an object of another type is seen."""
    enc = json._default_encoder   # noqa: SLF001
    diff = _state_diff(lambda: setattr(json, "_default_encoder", json.JSONDecoder()),
                       lambda: setattr(json, "_default_encoder", enc))
    assert "the module json" in diff, diff


# -- non-modules in sys.modules, a hand-made module -------------------------------------------

@pytest.mark.state_modules("r56a_z")       # (sys.modules' entries are read whatever is named)
def test_r56a_control_sys_modules_entries():
    """A non-module ``sys.modules`` entry added is seen (R40b); a global set on a module made
    by hand is seen."""
    diff = _state_diff(lambda: sys.modules.__setitem__("r56a_x", [1]),
                       lambda: sys.modules.pop("r56a_x"))
    assert diff == ["the sys.modules entry r56a_x (not made by an import)"], diff
    m = sys.modules["r56a_z"] = types.ModuleType("r56a_z")
    try:
        diff = _state_diff(lambda: setattr(m, "n", 1), lambda: delattr(m, "n"))
    finally:
        sys.modules.pop("r56a_z")
    assert diff == ["the module r56a_z"], diff


# -- own_guards: identity compare ------------------------------------------------------------

def _guard():
    from spec_lang.torch_frontend.own_guards import capture_own

    seen: list[int] = []

    def dispatch(func, types_, args=(), kwargs=None, *, k=1):
        seen.append(1)
        return func
    return capture_own(dispatch)


def _accepted(change) -> bool:
    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.own_guards import check_guard

    f = _guard()
    change(f)
    try:
        check_guard(f, f, "dispatch")
    except PlanError:
        return False
    return True


@pytest.mark.parametrize(("name", "change", "expect"), [
    ("untouched", lambda f: None, True),
    ("kwdefault set to the same object", lambda f: f.__kwdefaults__.update(k=1), True),
    ("doc set to the same object", lambda f: setattr(f, "__doc__", f.__doc__), True),
    ("kwdefaults key added", lambda f: f.__kwdefaults__.update(z=1), False),
    ("annotations key added", lambda f: f.__annotations__.update(r=1), False),
    ("defaults replaced by an equal tuple", lambda f: setattr(
        f, "__defaults__", tuple(list(f.__defaults__))), False),
    ("a cell's contents replaced", lambda f: setattr(f.__closure__[0], "cell_contents", []),
     False),
    ("__type_params__ set (3.11: lands in vars(f))", lambda f: setattr(
        f, "__type_params__", (1,)), False),
])
def test_r56a_guard_identity(name, change, expect):
    """``check_guard`` accepts a guard left as it was (the same objects put back) and refuses
    one whose parts were replaced (controls of R55e-4's fix)."""
    assert _accepted(change) is expect, name


# -- slow: the plans ----------------------------------------------------------------------------



@pytest.mark.slow
def test_r56a_01_stdlib_doc_counter_not_equivalent():
    assert _prove(ROUND / "r56a_01_counter_in_stdlib_module_doc_wrong.py") != 0


@pytest.mark.slow
def test_r56a_02_train_file_dunder_counter_not_equivalent():
    assert _prove(ROUND / "r56a_02_counter_in_train_file_dunder_global_wrong.py") != 0


@pytest.mark.slow
def test_r56a_03_same_type_global_counter_not_equivalent():
    assert _prove(ROUND / "r56a_03_counter_in_stdlib_global_same_type_object_wrong.py") != 0


# -- the lead's fix: what warnings adds is not a change (every plan was UNKNOWN without it) ----

_REGISTRY = {"version": 3, ("a warning the step shows the first time", UserWarning, 5): True}


@pytest.mark.state_modules("colorsys")
def test_r56a_control_a_warning_registry_made_by_the_step_is_not_a_change():
    """``warnings`` gives a module a ``__warningregistry__`` when the step warns there for the
    first time: neither another module's nor the train file's is a change (mlp_ddp.py was
    UNKNOWN, "the module spec_lang.torch_frontend.stale_refs leaves the step as ...")."""
    import colorsys

    diff = _state_diff(lambda: setattr(colorsys, "__warningregistry__", dict(_REGISTRY)),
                       lambda: vars(colorsys).pop("__warningregistry__", None))
    assert diff == [], diff
    mod = _user_module()
    assert _user_changes(mod, lambda: setattr(mod, "__warningregistry__", dict(_REGISTRY))) == {}
    odd = {**_REGISTRY, ("text", UserWarning, 6): 2}     # not what warnings puts there: read
    assert list(_user_changes(mod, lambda: setattr(mod, "__warningregistry__", odd))) == [
        "the global __warningregistry__ of r56a_02_counter_in_train_file_dunder_global_wrong.py"]
