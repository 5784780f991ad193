"""Operators run where the trace cannot see them: torch's dispatch switches, refused when the
train file calls them (adversarial round 49e, R49e-1 / R49e-2).

The capture sees an operator because ``make_fx``'s proxy mode and the ``FakeTensorMode`` are
torch dispatch modes, reached through the dispatcher's ``Python`` key. torch has private
switches that take an operator past them: ``torch._C._DisableTorchDispatch()``, a guard that
excludes the ``Python`` key (``_ExcludeDispatchKeyGuard``, ``_ForceDispatchKeyGuard``, the
TLS setters), the mode stack popped or unset (``_pop_mode_temporarily``,
``_disable_current_modes``, ``unset_fake_temporarily``, ``disable_proxy_modes_tracing``), and
their wrappers (``no_dispatch``). An operator run under one is missing from the trace, from the
write counting (:mod:`storage_writes`) and from the freed-memory refusal (:mod:`fsdp_freed`),
while the real run executes it: r49e_05 doubled the DTensor gradients' local tensors in place
under ``_DisableTorchDispatch`` and was EQUIVALENT (R49e-1); r49e_02 read FSDP2's freed
unsharded memory under it, not refused (R49e-2).

:func:`install` (the capture child, before the train file is imported) replaces each switch in
:data:`ESCAPES`, at every binding a loaded torch module holds, with a wrapper that refuses a
call whose caller (past standard-library frames) is not torch's or the front end's: the train
file, a module of the user's, code ``exec``'d from a string. torch's own calls pass through
unchanged. A name the train file binds at import binds the wrapper. The original reached past
every binding (``gc.get_objects()``, ``object.__subclasses__()``), or a kernel called by its
dispatch key (``OpOverload._op_dk``, ``_handle.redispatch_boxed``), stay the R29-4 family: a
train file that sets out to subvert the capture in its own process (``docs/torch.md``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from spec_lang.errors import PlanError

__all__ = ["ESCAPES", "install", "uninstall", "check", "installed"]

ESCAPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch._C", ("_DisableTorchDispatch", "_ExcludeDispatchKeyGuard", "ExcludeDispatchKeyGuard",
                  "_ForceDispatchKeyGuard", "_IncludeDispatchKeyGuard",
                  "_SetExcludeDispatchKeyGuard", "_dispatch_tls_set_dispatch_key_excluded",
                  "_dispatch_tls_set_dispatch_key_included", "_set_meta_in_tls_dispatch_include",
                  "_unset_dispatch_mode", "_set_dispatch_mode", "_pop_torch_dispatch_stack",
                  "_push_on_torch_dispatch_stack")),
    ("torch.utils._mode_utils", ("no_dispatch",)),
    ("torch.utils._python_dispatch", ("_disable_current_modes", "_pop_mode",
                                      "_pop_mode_temporarily", "_disable_infra_mode")),
    ("torch._subclasses.fake_tensor", ("unset_fake_temporarily",)),
    ("torch.fx.experimental.proxy_tensor", ("disable_proxy_modes_tracing",)),
    ("torch._ops", ("OpOverload.redispatch",)),
)
"""(module, names): torch 2.13's switches that run an operator past the dispatch modes, or
take the modes off the stack; ``Class.method`` names a method. Each is refused when called
from the train file's code (:func:`install`)."""

_SAVED: list[tuple[Any, str, Any]] = []
"""(owner, attribute, original) of every binding :func:`install` replaced."""
_FOUND: list[str] = []
"""Every refusal's message, in order (the train file may catch the error: :func:`check`)."""


@functools.lru_cache(maxsize=4096)
def _kind(filename: str) -> str:
    """``"ours"`` (torch's or the front end's file), ``"stdlib"`` (the standard library's, not
    an installed package under it), or ``"user"``."""
    import site
    import sysconfig

    import torch

    import spec_lang.torch_frontend as fe

    if filename.startswith(tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, fe))):
        return "ours"
    paths = sysconfig.get_paths()
    installed = {paths["purelib"], paths["platlib"], *site.getsitepackages(),
                 site.getusersitepackages()}
    if filename.startswith(paths["stdlib"] + os.sep) \
            and not filename.startswith(tuple(d + os.sep for d in installed)):
        return "stdlib"
    return "user"


def _user_caller(frame: Any) -> Any:
    """The first frame from ``frame`` outward that is not the standard library's, when it is
    the user's (None when it is torch's or the front end's, or there is none)."""
    while frame is not None and _kind(frame.f_code.co_filename) == "stdlib":
        frame = frame.f_back
    if frame is None or _kind(frame.f_code.co_filename) == "ours":
        return None
    return frame


def _wrap(orig: Any, name: str, path: str) -> Any:
    @functools.wraps(orig)
    def escape(*a: Any, **k: Any) -> Any:
        caller = _user_caller(sys._getframe(1))  # noqa: SLF001
        if caller is not None:
            from spec_lang.torch_frontend.thread_guard import user_line  # noqa: PLC0415

            line = user_line(path)
            if line == 1 and os.path.realpath(caller.f_code.co_filename) \
                    == os.path.realpath(path):
                line = caller.f_lineno
            _FOUND.append(
                f"{path}:{line}: the train file calls {name}, which runs operators past "
                "torch's dispatch modes: the capture's trace (make_fx, FakeTensorMode) would "
                "not see them while the real run executes them (R49e-1). Remove it; run the "
                "step's operators as ordinary torch calls")
            raise PlanError(_FOUND[-1])
        return orig(*a, **k)

    escape.__shardproof_escape__ = orig     # type: ignore[attr-defined]
    return escape


def install(path: str) -> None:
    """Replace every switch in :data:`ESCAPES`, at its module and at every binding of it in a
    loaded ``torch`` module, with a wrapper refusing the train file's calls (``path``: the
    train file, named in the message with the user's line). Call in the capture child before
    the train file is imported; :func:`uninstall` undoes it."""
    for modname, names in ESCAPES:
        mod = importlib.import_module(modname)
        for dotted in names:
            owner, _, name = (mod, "", dotted) if "." not in dotted else (
                getattr(mod, dotted.split(".")[0]), "", dotted.split(".")[1])
            orig = owner.__dict__.get(name) if isinstance(owner, type) else getattr(
                owner, name, None)
            if orig is None or hasattr(orig, "__shardproof_escape__"):
                continue
            wrapper = _wrap(orig, f"{modname}.{dotted}", path)
            if isinstance(owner, type):
                _SAVED.append((owner, name, orig))
                setattr(owner, name, wrapper)
                continue
            for other in list(sys.modules.values()):
                d = getattr(other, "__dict__", None)
                if d is None or not getattr(other, "__name__", "").startswith("torch"):
                    continue
                for key, value in list(d.items()):
                    if value is orig:
                        _SAVED.append((other, key, orig))
                        setattr(other, key, wrapper)


def uninstall() -> None:
    """Put back every binding :func:`install` replaced, and forget the refusals."""
    while _SAVED:
        owner, name, orig = _SAVED.pop()
        setattr(owner, name, orig)
    _FOUND.clear()


def check() -> None:
    """Refuse again a call the train file caught.

    Raises:
        PlanError: the first refusal since :func:`install` (exit 3)."""
    if _FOUND:
        raise PlanError(_FOUND[0])


@contextlib.contextmanager
def installed(path: str) -> Iterator[None]:
    """:func:`install` for the block, then :func:`check` and :func:`uninstall` (tests, and a
    capture in the calling process)."""
    install(path)
    try:
        yield
        check()
    finally:
        uninstall()
