"""Adversarial round 10 (``tests/adversarial/ATTEMPTS.md``, "Round 10"): false accepts of
``prove --torch`` after the round-9 fixes (``e0c6cf3``: ``step_state._Encoder._special`` reads
``random.Random`` and ``defaultdict`` by content, a module's own classes are fingerprinted, the
R6-9 zeros rule needs unchanged Python state).

Torch train files in ``plans/torch10/`` (the MLP of ``examples/torch/mlp_ddp.py``, dp = 2,
hand-written DDP, SGD; ``torch4_truth.py`` runs each for real, gloo, float64): step 1 agrees
to 2.8e-17, step 2 differs by 0.001-0.01, and ``prove --torch`` calls each EQUIVALENT.

* R10-1 state in a module that is neither the train file's neighbour nor a listed torch
  namespace: an attribute set on ``math`` (r10_01), the ``decimal`` context's precision
  (r10_06, C state reached through a stdlib function).
* R10-2 values a ``_special`` / early branch renders by a summary that drops state: an
  ``io.StringIO``'s buffer (r10_02: read by its empty ``__dict__``), an ``lru_cache``'s
  cached values (r10_03: ``currsize`` only), an ``Enum`` member's attributes (r10_04:
  ``repr``), a ``functools.partial``'s ``__dict__`` (probe).
* R10-3 ``__slots__`` looked up by their written names: a private slot (``"__scale"``, stored
  mangled: r10_05) or ``__slots__`` given as one string (probe) is never read.
* R10-4 Python state both steps change alike (a step counter) steers the next step's program:
  the parallel step divides by the world size at step 1 only (r10_07).
* R10-5 a change made after the after-step fingerprint: a timer thread the step starts
  (r10_08).
* R10-6 torch's C-level stacks left entered by the step: ``saved_tensors_hooks`` (r10_09), a
  ``TorchFunctionMode`` (r10_10).

Strict xfails assert the correct behaviour (not EQUIVALENT); ``prove --torch`` takes 40-110 s:
those tests are ``slow``. The unit probes of ``step_state`` are fast.
"""

from __future__ import annotations

import decimal
import enum
import functools
import io
import math
import sys
import types
from pathlib import Path

import pytest
import torch
from torch import nn

from spec_lang.torch_frontend.step_state import state_changes, step_state
from tests.adversarial.torch_prove import prove, without_harness

# the whole round runs under -m slow (the default suite's 10-minute budget, stop 55)
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
TORCH10 = HERE / "plans" / "torch10"

WRONG = [
    ("r10_01_stdlib_module_attribute.py", "R10-1: an attribute of the math module"),
    ("r10_02_stringio_content.py", "R10-2: an io.StringIO's buffer"),
    ("r10_03_lru_cache_content.py", "R10-2: an lru_cache's cached value"),
    ("r10_04_enum_member_attribute.py", "R10-2: an Enum member's attribute"),
    ("r10_05_private_slot.py", "R10-3: a private __slots__ entry"),
    ("r10_06_decimal_context.py", "R10-1: the decimal context's precision"),
    ("r10_07_counter_steers_next_step.py", "R10-4: a counter both sides advance steers step 2"),
    ("r10_08_thread_after_snapshot.py", "R10-5: a thread changes a global after the snapshot"),
    ("r10_09_saved_tensors_hooks_left_open.py", "R10-6: saved_tensors_hooks left entered"),
    ("r10_10_torch_function_mode_left_open.py", "R10-6: a TorchFunctionMode left entered"),
]
# every file above was a confirmed false accept (EQUIVALENT); all fixed in stop 23
# (step_state: other modules' globals, C-level state, summaries read in full, mangled slots;
# leftover: state both steps change alike is UNKNOWN)
OPEN10: set[str] = set()


@pytest.mark.slow
@pytest.mark.parametrize("name,why", WRONG, ids=[w[0][:6] for w in WRONG])
def test_wrong_train_file_is_not_equivalent(name, why, tmp_path, request):
    if name in OPEN10:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"finding {why} (open)"))
    out = prove(TORCH10 / name, tmp_path)
    assert out["_rc"] != 0 and out.get("verdict") != "EQUIVALENT", (why, out)


@pytest.mark.slow
@pytest.mark.parametrize("name", [w[0] for w in WRONG])
def test_the_files_are_really_wrong(name):
    """Run for real: step 1 agrees to float64 rounding, step 2 is >= 1e-3 away (weights ~0.3)."""
    sys.path.insert(0, str(HERE))
    from torch4_truth import run
    res = run(str(TORCH10 / name), steps=2)
    assert max(res[0].values()) <= 1e-12, res
    assert max(res[1].values()) >= 1e-3, res


def _user_module() -> types.ModuleType:
    mod = types.ModuleType("r10_user")
    mod.__file__ = str(HERE / "r10_user.py")
    return mod


def _changes(mod: types.ModuleType, change, model: nn.Module | None = None) -> dict[str, str]:
    model = model if model is not None else nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = step_state(model, opt, [mod])
    change()
    return without_harness(state_changes(before, step_state(model, opt, [mod])))


def test_step_state_sees_an_attribute_set_on_a_stdlib_module():
    mod = _user_module()
    mod.math = math
    try:
        assert _changes(mod, lambda: setattr(math, "r10_scale", 0.5)) != {}
    finally:
        vars(math).pop("r10_scale", None)


def test_step_state_sees_the_decimal_precision_changed():
    mod = _user_module()
    mod.decimal = decimal
    with decimal.localcontext():
        assert _changes(mod, lambda: setattr(decimal.getcontext(), "prec", 1)) != {}


def test_step_state_sees_a_stringio_written():
    mod = _user_module()
    mod.LOG = io.StringIO()
    assert _changes(mod, lambda: mod.LOG.write("x")) != {}


def test_step_state_sees_an_lru_cache_refilled_with_another_value():
    mod = _user_module()
    mod.SRC = [1.0]

    @functools.lru_cache(maxsize=None)
    def scale() -> float:
        return mod.SRC[0]

    mod.scale = scale
    scale()

    def refill() -> None:
        mod.SRC[0] = 0.5
        scale.cache_clear()
        scale()
        mod.SRC[0] = 1.0

    assert _changes(mod, refill) != {}
    assert scale() == 0.5       # the state the next step reads did change


def test_step_state_sees_an_enum_member_attribute():
    class Mode(enum.Enum):
        TRAIN = 1

    mod = _user_module()
    mod.Mode = Mode
    assert _changes(mod, lambda: setattr(Mode.TRAIN, "scale", 0.5)) != {}


def test_step_state_sees_a_partial_attribute():
    mod = _user_module()
    mod.P = functools.partial(max, 1.0)
    assert _changes(mod, lambda: setattr(mod.P, "scale", 0.5)) != {}


class _PrivateSlot:
    __slots__ = ("__scale",)

    def __init__(self) -> None:
        self.__scale = 1.0

    def set(self, v: float) -> None:
        self.__scale = v


class _StringSlots:
    __slots__ = "scale"


def test_step_state_sees_a_private_slot():
    mod = _user_module()
    mod.S = _PrivateSlot()
    assert _changes(mod, lambda: mod.S.set(0.5)) != {}


def test_step_state_sees_a_slot_of_string_slots():
    mod = _user_module()
    mod.S = _StringSlots()
    mod.S.scale = 1.0
    assert _changes(mod, lambda: setattr(mod.S, "scale", 0.5)) != {}


def test_step_state_sees_saved_tensors_hooks_left_entered():
    ctx = torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 0.5)
    entered = []

    def enter() -> None:
        ctx.__enter__()
        entered.append(ctx)

    try:
        assert _changes(_user_module(), enter) != {}
    finally:
        for c in entered:
            c.__exit__(None, None, None)


def test_step_state_sees_a_torch_function_mode_left_entered():
    from torch.overrides import TorchFunctionMode

    class Passing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    mode = Passing()
    entered = []

    def enter() -> None:
        mode.__enter__()
        entered.append(mode)

    try:
        assert _changes(_user_module(), enter) != {}
    finally:
        for m in entered:
            m.__exit__(None, None, None)
