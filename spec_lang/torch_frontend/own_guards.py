"""The capture's own guard functions on the trace's fake mode (``dispatch``: ``thread_guard``,
``storage_writes``; ``validate_and_convert_non_fake_tensors``: ``deep_copies``): recorded by
identity with what they were made with, skipped by the step-state fingerprint while they hold
it (R55a-2, R55c-5), checked as they are taken off (R55d-1). A step that reaches them does so
through a fake tensor's ``fake_mode``, which the real run's tensors do not have (adversarial
rounds 55a-55d, ``tests/adversarial/ATTEMPTS.md``)."""

from __future__ import annotations

import types
import weakref
from typing import Any

from spec_lang.torch_frontend.process_state import _cell

__all__ = ["CAPTURE_OWN", "capture_own", "check_guard", "ours"]


# the functions the capture's guards put on the trace's fake mode for the step (``dispatch``:
# ``thread_guard``, ``storage_writes``; ``validate_and_convert_non_fake_tensors``:
# ``deep_copies``), by identity, with what they were made with: not the user's state
# (``step_state``, R55a-2, R55c-5)
CAPTURE_OWN: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def _made_with(f: Any) -> tuple[Any, ...]:
    """What a function does or says besides its code's constants, each by identity: its code,
    defaults, keyword defaults and annotations (the dicts and every key and value in them),
    names, doc, the type of its ``__dict__``, and the objects its closure cells hold (R55d-3;
    R55e-4: compared by equality, an always-equal object or an empty dict subclass passed)."""
    def items(d: Any) -> tuple[Any, ...]:
        return (d, type(d), *(x for kv in (d.items() if type(d) is dict else ()) for x in kv))

    return (f.__code__, f.__defaults__, *items(f.__kwdefaults__), *items(f.__annotations__),
            f.__doc__, f.__module__, f.__qualname__, f.__name__, type(vars(f)),
            *(_cell(c) for c in f.__closure__ or ()))


def capture_own(f: Any) -> Any:
    """``f``, registered in :data:`CAPTURE_OWN` with what it is made with."""
    CAPTURE_OWN[f] = _made_with(f)
    return f


def ours(mode: Any) -> frozenset[str]:
    """The fake mode's attributes the capture's guards set for the step (``dispatch``:
    ``thread_guard``, ``storage_writes``; ``validate_and_convert_non_fake_tensors``:
    ``deep_copies``) while they hold the capture's own functions."""
    return frozenset(k for k in ("dispatch", "validate_and_convert_non_fake_tensors")
                     if isinstance(f := vars(mode).get(k), types.FunctionType)
                     and f in CAPTURE_OWN and type(vars(f)) is dict and not vars(f)
                     and _same(CAPTURE_OWN[f], f))


def _same(made: tuple[Any, ...], f: Any) -> bool:
    """``f`` still holds what :func:`capture_own` recorded, every part the very object it was
    (a default, keyword default, doc or closure cell the step replaced is state: R55c-5,
    R55d-3, R55e-4; an object a cell holds changed in place is the R29-4 family, R55e-3,
    docs/torch.md)."""
    now = _made_with(f)
    return len(now) == len(made) and all(a is b for a, b in zip(now, made))


def check_guard(now: Any, f: Any, key: str) -> None:
    """Refuse a step that replaced or changed the capture's guard ``f``, which was under
    ``key`` on the trace's fake mode and is ``now`` there (called as the guard is taken off:
    the after-step fingerprint does not meet it, R55d-1).

    Raises:
        PlanError: ``now`` is not ``f`` as :func:`capture_own` recorded it."""
    if now is f and type(vars(f)) is dict and not vars(f) and f in CAPTURE_OWN \
            and _same(CAPTURE_OWN[f], f):
        return
    from spec_lang.errors import PlanError

    raise PlanError(f"the step changed the capture's own {key} on the trace's fake mode: code "
                    "that reaches the tracer's objects (a fake tensor's fake_mode, which the "
                    "real run's tensors do not have) is not supported (R55d-1)")
