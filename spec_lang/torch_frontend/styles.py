"""Where the user's parallelisation put each module: for reports that name the user's line.

While the user's ``parallelize`` runs, every ``ParallelStyle`` (``ColwiseParallel()``, ...)
records the line of the train file (or a file next to it) that built it, and every
``parallelize_module`` call records which modules got which style; ``fully_shard`` and
``replicate`` calls are recorded by :mod:`dataparallel`. :func:`resolve_styles` turns that into
``module name -> ("RowwiseParallel(output_layouts=Shard(1))", "file:line")``, which the goals of
that module's parameters carry in their placement text.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator
from typing import Any

__all__ = ["record_styles", "resolve_styles", "styled_module"]


def _user_site(path: str) -> str:
    """``file:line`` of the innermost caller in the train file's folder (the train file or a
    module beside it, named as the train file is: ``examples/torch/llama_parallelize.py:60``)."""
    folder = os.path.dirname(os.path.realpath(path))
    for fr in reversed(traceback.extract_stack()[:-2]):
        if fr.filename and os.path.dirname(os.path.realpath(fr.filename)) == folder:
            name = os.path.join(os.path.dirname(path), os.path.basename(fr.filename))
            return f"{name}:{fr.lineno}"
    return path


@contextlib.contextmanager
def record_styles(path: str) -> Iterator[list[tuple[Any, dict[str, Any]]]]:
    """Within the block, styles remember their user line and ``parallelize_module`` its plan."""
    from torch.distributed.tensor.parallel import style as st
    import torch.distributed.tensor.parallel as tp
    import torch.distributed.tensor.parallel.api as api

    applied: list[tuple[Any, dict[str, Any]]] = []
    classes = [c for c in vars(st).values() if isinstance(c, type)
               and issubclass(c, st.ParallelStyle) and c is not st.ParallelStyle]
    inits = {c: c.__dict__.get("__init__") for c in classes}

    def wrap(c: type, init: Any) -> Any:
        def __init__(self: Any, *a: Any, **k: Any) -> None:  # noqa: N807
            init(self, *a, **k)
            if not hasattr(self, "_shardproof_site"):
                self._shardproof_site = _user_site(path)
                args = [repr(x) for x in a] + [f"{kk}={vv!r}" for kk, vv in k.items()]
                self._shardproof_repr = f"{c.__name__}({', '.join(args)})"
        return __init__

    for c, init in inits.items():
        if init is not None:
            c.__init__ = wrap(c, init)
    real = api.parallelize_module

    def parallelize_module(module: Any, device_mesh: Any = None, parallelize_plan: Any = None,
                           **kw: Any) -> Any:
        applied.append((module, dict(parallelize_plan) if isinstance(parallelize_plan, dict)
                        else {"": parallelize_plan}))
        return real(module, device_mesh, parallelize_plan, **kw)

    api.parallelize_module = parallelize_module
    tp.parallelize_module = parallelize_module
    try:
        yield applied
    finally:
        api.parallelize_module = real
        tp.parallelize_module = real
        for c, init in inits.items():
            if init is not None:
                c.__init__ = init


def resolve_styles(model: Any, applied: list[tuple[Any, dict[str, Any]]], units: list[Any],
                   path: str) -> dict[str, tuple[str, str]]:
    """Module name (in ``model``) -> (style, user line), for the styles and data-parallel
    wrappers the user applied."""
    names = {id(m): n for n, m in model.named_modules()}
    out: dict[str, tuple[str, str]] = {}
    for module, plan in applied:
        base = names.get(id(module))
        if base is None:
            continue
        for key, style in plan.items():
            sub = dict(module.named_modules())
            for sname, smod in sub.items():
                if _matches(sname, key):
                    full = f"{base}.{sname}" if base and sname else base or sname
                    out[full] = (getattr(style, "_shardproof_repr", type(style).__name__),
                                 getattr(style, "_shardproof_site", path))
    for u in units:
        n = names.get(id(u.module))
        if n is not None:
            what = "fully_shard" if u.kind == "fsdp" else "replicate"
            if u.divide_factor is not None:
                what += (f" (gradient divide factor {u.divide_factor:g} set at "
                         f"{u.settings.get('_divide_site', path)})")
            out.setdefault(n, (what, u.settings.get("_site", path)))
    return out


def _matches(name: str, pattern: str) -> bool:
    import fnmatch

    return name == pattern or fnmatch.fnmatchcase(name, pattern)


def styled_module(exc: BaseException, model: Any, styles: dict[str, tuple[str, str]]) -> str:
    """``layers.0.feed_forward, parallelised by PrepareModuleInput(...) at
    llama_parallelize.py:54``: the innermost module of ``model`` with a style (``styles``,
    from :func:`resolve_styles`) whose call is on ``exc``'s traceback; ``""`` when none is
    (stop 54's new user: a failure inside a styled module named only the model's line).
    Modules are matched by identity; the tree is walked through each module's own
    ``_modules`` dict as ``nn.Module.named_modules`` does, calling no module's methods
    (R56b-4, R56c-4; the message is the capture's failure, never a verdict)."""
    names = _module_names(model)
    found: str | None = None
    tb = exc.__traceback__
    while tb is not None:
        n = names.get(id(tb.tb_frame.f_locals.get("self")))
        if n is not None and n in styles:
            found = n
        tb = tb.tb_next
    if found is None:
        return ""
    style, site = styles[found]
    return f"{found or 'the model'}, parallelised by {style} at {site}"


def _module_names(model: Any) -> dict[int, str]:
    """id -> name of every module under ``model``, depth first, a module shared by two
    parents named by the first (``nn.Module.named_modules``' order), read from the modules'
    ``_modules`` dicts through the C ``__dict__`` descriptor only."""
    from spec_lang.torch_frontend.process_state import own_dict

    out: dict[int, str] = {}
    todo = [("", model)]
    while todo:
        name, m = todo.pop()
        if id(m) in out:
            continue
        out[id(m)] = name
        d = own_dict(m)
        subs = d.get("_modules") if d is not None else None
        if type(subs) is dict:
            todo.extend(reversed([(f"{name}.{k}" if name else k, c) for k, c in subs.items()
                                  if type(k) is str and c is not None]))
    return out
