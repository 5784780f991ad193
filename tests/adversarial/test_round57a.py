"""Adversarial round 57a (``tests/adversarial/ATTEMPTS.md``, "Round 57a"): suite57
(``process_state``'s per-fingerprint memo of ``_ident`` / global texts / ``_from_user``, gc
off while reading, ``value_text`` split out, ``modules=``) and b13cd72 (a held Python function
read by the identities of its parts), 9039f77 (``step_state._plain`` on the optimizer's keys).

Plans in ``plans/round57a/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(r57a_01, r57a_03, r57a_05 double their gradients from the second step on: step 1 w0 0.0 /
step 2 w0 0.0058).
The fast tests call ``process_state`` directly; the slow ones prove the plans. All three
findings are fixed (``value_text``: dicts read through ``dict``'s own methods, ``own_dict`` /
``module_dict`` for namespaces, ``issubclass(type(v), ...)`` for every type test).
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

ROUND = Path(__file__).resolve().parent / "plans" / "round57a"


def _changes(change) -> list[str]:
    """The entries ``state_changes`` reports for ``change()`` between two ``_process_state``
    fingerprints (the test process's ``__main__`` entries left out)."""
    from spec_lang.torch_frontend.process_state import _process_state
    from spec_lang.torch_frontend.step_state import state_changes

    before = _process_state([], [])
    change()
    after = _process_state([], [])
    return sorted(k for k in state_changes(before, after) if "main" not in k)


@pytest.fixture
def json_clean():
    yield
    vars(json).pop("r57a", None)


class _Quiet(dict):
    """A dict whose ``items()`` says nothing (counts its calls)."""
    calls = 0

    def items(self):
        type(self).calls += 1
        return []


class _Empty(dict):
    """A dict whose ``len`` says 0."""

    def __len__(self):
        return 0


def _held():
    def c0(*, s=0):
        pass
    return c0


# -- R57a-1: a held function's __dict__ / __kwdefaults__ / __annotations__ a dict subclass ----

@pytest.mark.state_modules("json")
@pytest.mark.parametrize("field", ["__dict__", "__kwdefaults__", "__annotations__"])
def test_r57a_1_function_dict_subclass_entry_seen(json_clean, field):
    f = _held()
    setattr(f, field, _Quiet(s=0))
    json.r57a = f
    assert _changes(lambda: dict.__setitem__(getattr(f, field), "s", 1)) == ["the module json"]


@pytest.mark.state_modules("json")
def test_r57a_1_function_dict_len_zero_entry_seen(json_clean):
    f = _held()
    f.__dict__ = _Empty(n=0)
    json.r57a = f
    assert _changes(lambda: dict.__setitem__(f.__dict__, "n", 1)) == ["the module json"]


@pytest.mark.state_modules("json")
def test_r57a_1_function_dict_items_not_called(json_clean):
    from spec_lang.torch_frontend.process_state import _process_state

    f = _held()
    f.__dict__ = _Quiet(n=0)
    json.r57a = f
    _Quiet.calls = 0
    _process_state([], [])
    assert _Quiet.calls == 0


@pytest.mark.state_modules("json")
def test_r57a_1_control_plain_function_dict_entry_seen(json_clean):
    f = _held()
    f.n = 0
    json.r57a = f
    assert _changes(lambda: setattr(f, "n", 1)) == ["the module json"]


# -- R57a-2: isinstance in _ident_text consults a __class__ property -------------------------

class _Counted:
    calls = 0

    @property
    def __class__(self):
        type(self).calls += 1
        return _Counted


class _Odd:
    @property
    def __class__(self):
        return types.FunctionType


@pytest.mark.state_modules("json")
def test_r57a_2_class_property_not_called(json_clean):
    from spec_lang.torch_frontend.process_state import _process_state

    json.r57a = _Counted()
    _Counted.calls = 0
    _process_state([], [])
    assert _Counted.calls == 0


@pytest.mark.state_modules("json")
def test_r57a_2_class_property_saying_function_reads(json_clean):
    from spec_lang.torch_frontend.process_state import _process_state

    json.r57a = _Odd()
    out = _process_state([], [])
    assert "the module json" in out


# -- controls of suite57's memo and gc ----------------------------------------------------

@pytest.mark.state_modules("json")
def test_r57a_control_function_code_replaced_seen(json_clean):
    f = _held()
    json.r57a = f
    assert _changes(lambda: setattr(f, "__code__", (lambda: 1).__code__)) == ["the module json"]


@pytest.mark.state_modules()
def test_r57a_control_gc_left_disabled_seen():
    import gc

    try:
        assert _changes(gc.disable) == ["interpreter and torch settings"]
    finally:
        gc.enable()


@pytest.mark.state_modules()
def test_r57a_control_fingerprint_restores_gc():
    import gc

    from spec_lang.torch_frontend.process_state import _process_state

    assert gc.isenabled()
    _process_state([], [])
    assert gc.isenabled()


def test_r57a_control_product_reads_every_module():
    """``step_state`` (the product's only caller) passes no ``modules=`` (only the user's
    module objects, ``user_ids``: R65b-1)."""
    import ast
    import inspect

    from spec_lang.torch_frontend import step_state

    calls = [n for n in ast.walk(ast.parse(inspect.getsource(step_state)))
             if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_process_state"]
    assert len(calls) == 1
    assert [k.arg for k in calls[0].keywords] == ["user_ids"] and len(calls[0].args) == 2


# -- proves --------------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
def test_r57a_01_function_dict_subclass_counter_not_equivalent():
    assert _prove(ROUND / "r57a_01_counter_in_function_dict_subclass_wrong.py") != 0


@pytest.mark.slow
def test_r57a_02_right_plan_class_property_has_a_verdict():
    """A right plan: EQUIVALENT (0) or UNKNOWN (2), not "capturing ... failed" (3)."""
    assert _prove(ROUND / "r57a_02_class_property_says_function_right.py") in (0, 2)


@pytest.mark.slow
def test_r57a_03_optimizer_dict_subclass_counter_not_equivalent():
    assert _prove(ROUND / "r57a_03_counter_in_optimizer_dict_subclass_wrong.py") != 0


@pytest.mark.slow
def test_r57a_04_control_optimizer_attribute_counter_not_equivalent():
    assert _prove(ROUND / "r57a_04_counter_in_optimizer_attribute_control_wrong.py") == 2


@pytest.mark.slow
def test_r57a_05_submodule_dict_subclass_counter_not_equivalent():
    assert _prove(ROUND / "r57a_05_counter_in_submodule_dict_subclass_wrong.py") != 0
