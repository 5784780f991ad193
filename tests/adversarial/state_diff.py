"""Helpers of the step-state fingerprint's adversarial tests (rounds 55e-56c): the process
state's entries a change touches, a user module's changes between two ``step_state``
fingerprints, one value's encoder text, and a quick ``prove --torch``."""

from __future__ import annotations

import types
from pathlib import Path


def state_diff(change, undo) -> list[str]:
    """The ``_process_state`` entries that differ (either way) after ``change()``; ``undo()``
    after the second fingerprint."""
    from spec_lang.torch_frontend.process_state import _process_state, release_kept

    before = _process_state([], [])
    change()
    try:
        after = _process_state([], [])
    finally:
        undo()
        release_kept()
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def user_changes(mod: types.ModuleType, change) -> dict[str, str]:
    """``state_changes`` of ``step_state`` with ``mod`` as the user's module, around
    ``change()`` (the model and optimizer made before either fingerprint)."""
    import torch

    from spec_lang.torch_frontend.step_state import state_changes, step_state

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = step_state(model, opt, [mod])
    change()
    return state_changes(before, step_state(model, opt, [mod]))


def prove(path: Path) -> int:
    """``prove --torch path --jobs 1 --no-check``'s exit code, in this process."""
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


def encoder_text(v) -> tuple[str, bool]:
    """``v``'s step-state encoder text (rounds 57b, 57c) and whether it is marked unreadable."""
    from spec_lang.torch_frontend.step_state import _Encoder

    e = _Encoder({}, frozenset())
    t = e.enc(v)
    return t, e.unreadable


def encoder_seen(v, change) -> bool:
    """Whether ``change()`` (in place on ``v``) is visible: the text changes, or ``v`` is
    unreadable (reported whether or not it changed)."""
    t0, u0 = encoder_text(v)
    change()
    t1, u1 = encoder_text(v)
    return t0 != t1 or u0 or u1
