"""Adversarial round 58c (``tests/adversarial/ATTEMPTS.md``, "Round 58c"): 639e3c9's
``step_state._trusted_class`` (a class read by its name alone when its module holds it and it
predates the train file, or its module was imported since) and the names of ``step_state``'s
entries attacked.

Plans in ``plans/round58c/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``
(each ``*_wrong`` plan doubles its gradients from the second step on). The fast tests call
``step_state._Encoder`` or ``step_state.step_state`` directly.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROUND = Path(__file__).resolve().parent / "plans" / "round58c"
ROOT = Path(__file__).resolve().parents[2]
LATE = "torch.utils.show_pickle"    # a torch module nothing imports before a train file


def _text(v) -> tuple[str, bool]:
    """``v``'s fingerprint text and whether it is marked unreadable."""
    from spec_lang.torch_frontend.step_state import _Encoder

    e = _Encoder({}, frozenset())
    t = e.enc(v)
    return t, e.unreadable


def _seen(v, change) -> bool:
    """Whether ``change()`` is visible: the text changes, or ``v`` is unreadable."""
    t0, u0 = _text(v)
    change()
    t1, u1 = _text(v)
    return t0 != t1 or u0 or u1


def _late_module(monkeypatch):
    """A baseline taken now (as the capture child takes it before the train file), then
    :data:`LATE` imported afresh (a new module, as the train file's import makes it); both
    undone by ``monkeypatch``."""
    from spec_lang.torch_frontend import op_guard

    monkeypatch.delitem(sys.modules, LATE, raising=False)
    import torch.utils
    monkeypatch.delattr(torch.utils, "show_pickle", raising=False)
    monkeypatch.setattr(op_guard, "_BASELINE", [op_guard.Baseline()])
    mod = importlib.import_module(LATE)
    assert mod is sys.modules[LATE]
    return mod


# -- R58c-1: a class put into a torch module imported after the baseline ----------------------

@pytest.mark.state_modules(LATE)
def test_r58c_1_class_put_in_late_torch_module_seen(monkeypatch):
    mod = _late_module(monkeypatch)

    class Cnt:
        n = 0
    Cnt.__module__ = LATE
    Cnt.__qualname__ = "Cnt"
    monkeypatch.setattr(mod, "Cnt", Cnt, raising=False)
    assert _seen(Cnt, lambda: setattr(Cnt, "n", 1))


@pytest.mark.state_modules(LATE)
def test_r58c_1_object_of_class_put_in_late_torch_module_seen(monkeypatch):
    mod = _late_module(monkeypatch)

    class P:
        def __init__(self):
            self._n = 0
    P.__module__ = LATE
    P.__qualname__ = "P"
    monkeypatch.setattr(mod, "P", P, raising=False)
    o = P()
    assert _seen(o, lambda: setattr(o, "_n", 1))


@pytest.mark.state_modules(LATE)
def test_r58c_1_control_class_not_held_by_late_module_seen(monkeypatch):
    """Control: the same class naming the late module but not held there is read in full."""
    _late_module(monkeypatch)

    class Cnt:
        n = 0
    Cnt.__module__ = LATE
    Cnt.__qualname__ = "Cnt"
    assert _seen(Cnt, lambda: setattr(Cnt, "n", 1))


@pytest.mark.state_modules(LATE)
def test_r58c_1_control_class_put_in_module_loaded_before_seen(monkeypatch):
    """Control (R58b-4's fix): put into a torch module loaded before the baseline: read."""
    from spec_lang.torch_frontend import op_guard
    import torch.nn.modules.linear as lin

    monkeypatch.setattr(op_guard, "_BASELINE", [op_guard.Baseline()])

    class Cnt:
        n = 0
    Cnt.__module__ = lin.__name__
    Cnt.__qualname__ = "Cnt"
    monkeypatch.setattr(lin, "Cnt", Cnt, raising=False)
    assert _seen(Cnt, lambda: setattr(Cnt, "n", 1))


# -- R58c-2: two classes of the model's MRO with one qualname: one entry ------------------------

def _mk(base):
    class Sub(base):
        pass
    return Sub


def _model_state(cls) -> tuple[dict, dict]:
    """``step_state`` of a ``cls`` model before and after ``cls.n = 1``."""
    from spec_lang.torch_frontend.step_state import step_state

    cls.n = 0
    model = cls(2, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = step_state(model, opt, [])
    cls.n = 1
    return before, step_state(model, opt, [])


@pytest.mark.state_modules()
def test_r58c_2_mro_classes_same_qualname_seen():
    cls = _mk(_mk(torch.nn.Linear))
    assert cls.__qualname__ == cls.__mro__[1].__qualname__
    before, after = _model_state(cls)
    assert before != after


@pytest.mark.state_modules()
def test_r58c_2_control_one_local_class_seen():
    before, after = _model_state(_mk(torch.nn.Linear))
    assert before != after


# -- R58c-3: an attribute key spelled as another entry's name -----------------------------------

@pytest.mark.state_modules()
def test_r58c_3_optimizer_key_named_as_param_groups_entry_seen():
    from spec_lang.torch_frontend.step_state import state_changes, step_state

    model = torch.nn.Linear(2, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    vars(opt)["param_groups[0]"] = [0]
    before = step_state(model, opt, [])
    vars(opt)["param_groups[0]"][0] = 1
    assert state_changes(before, step_state(model, opt, []))  # what the capture compares


@pytest.mark.state_modules()
def test_r58c_3_module_dotted_key_named_as_submodule_entry_seen():
    from spec_lang.torch_frontend.step_state import state_changes, step_state

    model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(2, 2, bias=False)))
    model[0][0].cnt = [0]
    vars(model[0])["0.cnt"] = [0]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = step_state(model, opt, [])
    vars(model[0])["0.cnt"][0] = 1
    assert state_changes(before, step_state(model, opt, []))  # what the capture compares


@pytest.mark.state_modules()
def test_r58c_3_control_optimizer_attribute_seen():
    from spec_lang.torch_frontend.step_state import step_state

    model = torch.nn.Linear(2, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    vars(opt)["r58c"] = [0]
    before = step_state(model, opt, [])
    vars(opt)["r58c"][0] = 1
    assert step_state(model, opt, []) != before


# -- R58c-4: `_is_torch`'s prefixes have no dot boundary -------------------------------------------

@pytest.mark.state_modules("numpy_r58c_unit")
def test_r58c_4_class_of_module_named_with_trusted_prefix_seen(monkeypatch):
    import types

    from spec_lang.torch_frontend import op_guard

    monkeypatch.setattr(op_guard, "_BASELINE", [op_guard.Baseline()])
    mod = types.ModuleType("numpy_r58c_unit")
    monkeypatch.setitem(sys.modules, "numpy_r58c_unit", mod)

    class Cnt:
        n = 0
    Cnt.__module__ = "numpy_r58c_unit"
    Cnt.__qualname__ = "Cnt"
    mod.Cnt = Cnt
    assert _seen(Cnt, lambda: setattr(Cnt, "n", 1))


# -- end to end ---------------------------------------------------------------------------------

def _prove(plan: str) -> subprocess.CompletedProcess:
    code = ("import sys;from proofs.cli import prove_main;"
            "sys.exit(prove_main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, "--torch", str(ROUND / plan),
                           "--jobs", "1", "--no-check"], cwd=ROOT, capture_output=True,
                          text=True, check=False)


_WRONG = ["r58c_01_class_put_in_torch_module_imported_late_wrong.py",
          "r58c_02_mro_classes_same_qualname_wrong.py",
          "r58c_03_optimizer_key_named_as_entry_wrong.py",
          "r58c_06_helper_module_named_numpy_prefix_wrong.py"]


@pytest.mark.slow
@pytest.mark.parametrize("plan", _WRONG)
def test_r58c_wrong_plan_not_equivalent(plan):
    r = _prove(plan)
    assert r.returncode != 0, r.stdout[-2000:]


_RIGHT = ["r58c_04_ordinary_wrappers_right.py",
          "r58c_05_replicate_torch_objects_held_right.py"]


@pytest.mark.slow
@pytest.mark.parametrize("plan", _RIGHT)
def test_r58c_right_plan_equivalent(plan):
    r = _prove(plan)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "EQUIVALENT" in r.stdout
