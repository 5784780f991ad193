"""Adversarial round 63b (``tests/adversarial/ATTEMPTS.md``, "Round 63b"): 71f5189a's step-state
fingerprint attacked where round 63a did not (context variables, the decimal context,
``value_text.deep_text``'s reach). Plans in ``plans/round63b/`` (template r63a_06: the parallel
step doubles its gradients from step 2 on a flag); the truth is
``python tests/adversarial/torch4_truth.py FILE 2``.

R63b-1: decimal's context variable is left out of "the context variables" and its context is
read by its fields only: a step that replaces the current context by a copy (same fields) is
no change, and the context's identity is a flag.
R63b-2: a context variable is read by name, identity and (plain) value; its default is not: a
``ContextVar(..., default=[0])`` set to 0 keeps a counter in the list (``Context().run(v.get)``).
R63b-3: ``deep_text`` reads a function's code, closure, defaults and own ``__dict__``, not its
``__globals__``: a signal handler compiled by ``exec`` into a private globals dict keeps a
counter there (a user finalizer's function the same, unit form).
R63b-4: ``deep_text`` reads a bound method by ``object_text`` only (R62b-2's cause, closed for
context variables by making them unreadable, open for signal handlers): the method's object's
list attribute, changed in place, is unread.
R63b-5: ``deep_text`` reads a class by identity (docs/torch.md says "classes by identity and own
attributes"; a class's own namespace is a mappingproxy, not read): a counter in a class
attribute of a signal handler's class (bound method or callable instance).

The unit form runs a snippet in a child of its own between two ``_process_state`` fingerprints
(``child_probe.patch_flags``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.adversarial.child_probe import patch_flags

TREE = Path(__file__).resolve().parents[2]
ROUND = Path(__file__).resolve().parent / "plans" / "round63b"

_REASONS = {
    "R63b-1": "R63b-1: decimal's context read by its fields only (its variable left out of the "
              "context variables): the context's identity is a step counter",
    "R63b-2": "R63b-2: a context variable's default (a list) is not read",
    "R63b-3": "R63b-3: deep_text does not read a function's __globals__ (a signal handler "
              "compiled into a private globals dict)",
    "R63b-4": "R63b-4: deep_text reads a bound method's object by object_text only (R62b-2's "
              "cause, for signal handlers): a list attribute changed in place is unread",
    "R63b-5": "R63b-5: deep_text reads a class by identity only: a class attribute of a signal "
              "handler's class is unread",
}

_UNIT = {
    "decimal_context_identity": '''
import decimal
_ID0 = id(decimal.getcontext())
def _flag():
    c = decimal.getcontext()
    v = id(c) != _ID0
    if not v:
        decimal.setcontext(c.copy())
    return v
''',
    "contextvar_default_list": '''
import contextvars
def _mk():
    v = contextvars.ContextVar("r63b_steps", default=[0])
    v.set(0)
_mk()
def _flag():
    v = next(k for k in contextvars.copy_context() if k.name == "r63b_steps")
    box = contextvars.Context().run(v.get)
    box[0] += 1
    return box[0] > 1
''',
    "signal_handler_globals": '''
def _mk():
    g = {"n": 0}
    exec("def h(*a):\\n    pass\\n", g)
    signal.signal(signal.SIGUSR1, g["h"])
_mk()
def _flag():
    g = signal.getsignal(signal.SIGUSR1).__globals__
    g["n"] += 1
    return g["n"] > 1
''',
    "finalizer_function_globals": '''
import weakref
class _Obj:
    pass
_O = _Obj()
def _mk():
    g = {"n": 0}
    exec("def fin():\\n    pass\\n", g)
    weakref.finalize(_O, g["fin"])
_mk()
def _flag():
    f = next(i.func for i in vars(weakref.finalize)["_registry"].values()
             if "n" in getattr(i.func, "__globals__", {}))
    g = f.__globals__
    g["n"] += 1
    return g["n"] > 1
''',
    "signal_handler_bound_method_box": '''
def _mk():
    class K:
        def __init__(self):
            self.box = [0]
        def h(self, *a):
            pass
    signal.signal(signal.SIGUSR1, K().h)
_mk()
def _flag():
    b = signal.getsignal(signal.SIGUSR1).__self__.box
    b[0] += 1
    return b[0] > 1
''',
    "signal_handler_bound_method_class_attr": '''
def _mk():
    class K:
        n = 0
        def h(self, *a):
            pass
    signal.signal(signal.SIGUSR1, K().h)
_mk()
def _flag():
    K = type(signal.getsignal(signal.SIGUSR1).__self__)
    K.n += 1
    return K.n > 1
''',
    "signal_handler_callable_class_attr": '''
def _mk():
    class K:
        n = 0
        def __call__(self, *a):
            pass
    signal.signal(signal.SIGUSR1, K())
_mk()
def _flag():
    K = type(signal.getsignal(signal.SIGUSR1))
    K.n += 1
    return K.n > 1
''',
}
_FINDING = {"decimal_context_identity": "R63b-1", "contextvar_default_list": "R63b-2",
            "signal_handler_globals": "R63b-3",
            "finalizer_function_globals": "R63b-3", "signal_handler_bound_method_box": "R63b-4",
            "signal_handler_bound_method_class_attr": "R63b-5",
            "signal_handler_callable_class_attr": "R63b-5"}

# controls (seen): a signal handler's own __dict__ counter (R62b-1's fix), a list in its
# closure changed in place, a context variable set to the counter, the decimal precision
_CONTROLS = {
    "signal_handler_own_dict": '''
def _mk():
    def h(*a):
        pass
    h.n = 0
    signal.signal(signal.SIGUSR1, h)
_mk()
def _flag():
    h = signal.getsignal(signal.SIGUSR1)
    h.n += 1
    return h.n > 1
''',
    "signal_handler_closure_list": '''
def _mk():
    box = [0]
    def h(*a):
        return box
    signal.signal(signal.SIGUSR1, h)
_mk()
def _flag():
    b = signal.getsignal(signal.SIGUSR1)()
    b[0] += 1
    return b[0] > 1
''',
    "contextvar_value": '''
import contextvars
def _mk():
    contextvars.ContextVar("r63b_value").set(0)
_mk()
def _flag():
    v = next(k for k in contextvars.copy_context() if k.name == "r63b_value")
    n = v.get()
    v.set(n + 1)
    return n > 0
''',
    "decimal_prec": '''
import decimal
_P0 = decimal.getcontext().prec
def _flag():
    c = decimal.getcontext()
    v = c.prec != _P0
    c.prec = _P0 + 1
    return v
''',
}


@functools.lru_cache(maxsize=None)
def _unit(name: str) -> dict:
    return patch_flags("r63b", {name: {**_UNIT, **_CONTROLS}[name]})[name]


@pytest.mark.slow   # (the flag's lever; its change is checked by the fast test)
@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63b_unit_flag_tells_step_2_from_step_1(name):
    assert (_unit(name)["flag1"], _unit(name)["flag2"]) == (False, True), _unit(name)


@pytest.mark.state_modules()
@pytest.mark.parametrize("name", sorted(_UNIT) + sorted(_CONTROLS))
def test_r63b_unit_counter_is_a_change(name):
    """Each finding's unit form (fixed in stop 63) and the controls: a change is seen."""
    assert _unit(name)["changes"], (_REASONS.get(_FINDING.get(name)), _unit(name))


def _prove(path: Path) -> int:
    from proofs.cli import prove_main  # noqa: PLC0415
    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
@pytest.mark.parametrize("plan", [
    "r63b_01_decimal_context_identity_wrong.py",
    "r63b_02_contextvar_default_list_wrong.py",
    "r63b_03_signal_handler_function_globals_wrong.py",
    "r63b_04_signal_handler_bound_method_object_wrong.py",
    "r63b_05_signal_handler_class_attribute_wrong.py",
])
def test_r63b_wrong_plan_not_equivalent(plan):
    assert _prove(ROUND / plan) != 0


@pytest.mark.slow
def test_r63b_global_hook_state_caught():
    """Control (caught, UNKNOWN): a counter in a global forward pre-hook's own ``__dict__``,
    the hook held by torch's ``_global_forward_pre_hooks`` only (the unit form with
    ``_process_state`` alone sees no change; ``step_state`` does)."""
    assert _prove(ROUND / "r63b_06_global_forward_pre_hook_state_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    TREE / "examples" / "torch" / "mlp_ddp.py",
    TREE / "examples" / "torch" / "gpt2_ddp.py",
])
def test_r63b_right_plans_equivalent(path):
    assert _prove(path) == 0
