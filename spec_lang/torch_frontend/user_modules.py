"""The user's modules as the capture sees them: the train file's module and the modules next to
it (``spec_lang/torch_frontend/capture.py``), and the stack-trace anchors that make every
traced node, the backward's too, name a line of theirs."""

from __future__ import annotations

import types
from typing import Any

from spec_lang.torch_frontend.contract import TrainFile

__all__ = ["_user_modules", "_is_next_to", "_register_user_frames"]


def _user_modules(tf: TrainFile) -> list[Any]:
    """The train file's module and the modules next to it (where ``fully_shard`` may be
    bound by name)."""
    import os
    import sys as _sys

    folder = os.path.dirname(os.path.realpath(tf.path))
    return [tf.module] + [m for m in list(_sys.modules.values()) if m is not tf.module
                          and _is_next_to(m, folder)]


def _is_next_to(m: Any, folder: str) -> bool:
    """``m`` is a module loaded from a file in ``folder``. A module whose ``__file__`` is not an
    absolute path is not: torch's op namespaces say ``__file__ = "_ops.py"``, which
    ``realpath`` would place in the working directory -- the train file's own folder when the
    user runs ``prove --torch train.py`` there, and ``torch.ops`` then read as user state
    (a false UNKNOWN: "the global _dir of _ops.py")."""
    import os

    f = getattr(m, "__file__", None)
    name = getattr(m, "__name__", "") or ""
    return (isinstance(f, str) and os.path.isabs(f) and name != "torch"
            and not name.startswith("torch.")
            and os.path.dirname(os.path.realpath(f)) == folder)


def _register_user_frames(tf: TrainFile) -> None:
    """Keep the frames of the user's functions (the train file and the modules next to it) in
    the nodes' stack traces (make_fx keeps only ``forward`` frames otherwise), so that every
    node, including the backward's (``loss.backward()``), names a user line."""
    import inspect
    import os
    import sys as _sys

    from torch.fx import proxy

    folder = os.path.dirname(os.path.realpath(tf.path))
    mods = [tf.module] + [m for m in list(_sys.modules.values()) if m is not tf.module
                          and _is_next_to(m, folder)]
    for m in mods:
        for v in list(vars(m).values()):
            fns = [v] if inspect.isfunction(v) else (
                [f for f in vars(v).values() if inspect.isfunction(f)] if inspect.isclass(v)
                else [])
            for f in fns:
                code = getattr(f, "__code__", None)
                if code is not None and os.path.dirname(os.path.realpath(code.co_filename)) \
                        == folder:
                    # and the functions defined in it (a hook written as a lambda in
                    # ``parallelize``): their lines name where a divergence starts
                    for c in _nested_code(code):
                        proxy._register_stack_trace_anchor(  # noqa: SLF001
                            types.SimpleNamespace(__code__=c))


def _nested_code(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and every code object defined in it (lambdas, inner functions), depth first."""
    out, stack = [], [code]
    while stack:
        c = stack.pop()
        out.append(c)
        stack.extend(x for x in c.co_consts if isinstance(x, types.CodeType))
    return out
