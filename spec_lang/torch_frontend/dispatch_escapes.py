"""Operators run where the trace cannot see them: torch's dispatch switches, refused when the
train file calls them (adversarial rounds 49e, 50a, 50b: R49e-1, R49e-2, R50a-1 .. R50a-3).

The capture sees an operator because ``make_fx``'s proxy mode and the ``FakeTensorMode`` are
torch dispatch modes, reached through the dispatcher's ``Python`` key. torch has private
switches that take an operator past them: ``torch._C._DisableTorchDispatch()``, a guard that
excludes the ``Python`` key (``_ExcludeDispatchKeyGuard``, ``_ForceDispatchKeyGuard``, the
TLS setters), the mode stack popped, unset or exited (``_pop_mode_temporarily``,
``_disable_current_modes``, ``_unset_infra_mode``, ``unset_fake_temporarily``,
``disable_proxy_modes_tracing``, the infra modes' ``__exit__``), and their wrappers
(``no_dispatch``). An operator run under one is missing from the trace, from the write
counting (:mod:`storage_writes`) and from the freed-memory refusal (:mod:`fsdp_freed`), while
the real run executes it: r49e_05 doubled the DTensor gradients' local tensors in place under
``_DisableTorchDispatch`` and was EQUIVALENT (R49e-1); r49e_02 read FSDP2's freed unsharded
memory under it, not refused (R49e-2).

:func:`install` (the capture child, before the train file is imported) replaces each switch in
:data:`ESCAPES` / :data:`INFRA_ESCAPES`, at every binding a loaded torch module holds, with a
wrapper (no ``__wrapped__``: R50a-2) that refuses a call the train file's code makes
(:func:`_user_caller`: frames judged by their code object, not their file name, R50a-3; a
torch helper that calls a switch it was handed is looked through). torch's own calls pass
through unchanged, and so does a dispatch mode of the train file's own. A name the train file
binds at import binds the wrapper. Not covered, the R29-4 family (a train file that sets out
to subvert the capture in its own process, ``docs/torch.md``): the original reached past every
binding (``gc.get_objects()``, ``object.__subclasses__()``, the wrapper's closure);
``torch._C._disabled_torch_dispatch_impl`` (``Tensor.__torch_dispatch__``, compared by identity
in torch, so not wrapped: R50a-1) and kernels called by dispatch key (``OpOverload._op_dk``,
``_handle.redispatch_boxed``); a torch helper that runs code it is handed under a switch its own
code enters (R50b-1). A profile hook that judged the state instead of the names caught more,
and made every capture 2.2x slower (``tests/adversarial/ATTEMPTS.md``, round 50a).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from spec_lang.errors import PlanError

__all__ = ["ESCAPES", "install", "uninstall", "check", "installed", "is_wrapper"]

SETTERS_WITHOUT_GETTER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch._C", ("_jit_set_bailout_depth", "_jit_set_logging_stream", "_jit_set_emit_hooks",
                  "_jit_set_nvfuser_enabled", "_jit_set_nvfuser_guard_mode",
                  "_jit_set_nvfuser_horizontal_mode", "_jit_set_nvfuser_single_node_mode",
                  "_jit_set_nvfuser_skip_node_kind", "_jit_set_onnx_log_output_stream",
                  "_jit_set_utf8_decoding_ignore", "_set_cached_tensors_enabled",
                  "_set_override_stale_capture_stream", "_set_print_stack_traces_on_fatal_signal",
                  "_set_should_use_format_with_string_table",
                  "_set_warn_on_accumulate_grad_stream_mismatch",
                  "_enable_mobile_interface_call_export", "_set_skip_next_torch_function",
                  "_set_generator_metaclass", "_set_worker_pids")),
    ("torch._C._autograd", ("_enable_record_function", "_set_empty_test_observer",
                            "_enable_profiler_legacy", "_disable_profiler_legacy")),
    ("torch._C._distributed_c10d", ("_set_thread_isolation_mode", "_set_global_rank",
                                    "set_debug_level_from_env")),
    ("torch._C._functorch", ("_set_vmap_fallback_warning_enabled",)),
    ("torch._C._distributed_rpc", ("_disable_jit_rref_pickle", "_enable_jit_rref_pickle",
                                   "_disable_server_process_global_profiler",
                                   "_enable_server_process_global_profiler",
                                   "_set_profiler_node_id", "_set_rpc_timeout",
                                   "enable_gil_profiling", "_set_and_start_rpc_agent")),
    ("torch._C._lazy", ("_set_reuse_ir",)),
    ("torch._C._profiler", ("_set_cuda_sync_enabled_val", "_set_fwd_bwd_enabled_val",
                            "_set_record_concrete_inputs_enabled_val",
                            "_enable_execution_trace_observer",
                            "_disable_execution_trace_observer")),
)
"""(module, names): torch's process-wide settings with a setter and no getter, nor a setter
answering the old value (``torch_c_state.SETTINGS_READERS`` reads every other;
``tests/torch_frontend/test_torch_c_state.py`` classifies every setter of torch 2.13's): the
step-state fingerprint cannot compare them, so the train file's own calls are refused (R63c-1)."""
_SETTERS = frozenset(f"{m}.{n}" for m, names in SETTERS_WITHOUT_GETTER for n in names)

ESCAPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch._C", ("_DisableTorchDispatch", "_ExcludeDispatchKeyGuard", "ExcludeDispatchKeyGuard",
                  "_ForceDispatchKeyGuard", "_IncludeDispatchKeyGuard",
                  "_SetExcludeDispatchKeyGuard", "_dispatch_tls_set_dispatch_key_excluded",
                  "_dispatch_tls_set_dispatch_key_included", "_set_meta_in_tls_dispatch_include",
                  "_unset_dispatch_mode", "_set_dispatch_mode", "_pop_torch_dispatch_stack",
                  "_push_on_torch_dispatch_stack", "_dispatch_call_boxed")),
    ("torch.utils._mode_utils", ("no_dispatch",)),
    ("torch.utils._python_dispatch", ("_disable_current_modes", "_pop_mode",
                                      "_pop_mode_temporarily", "_disable_infra_mode",
                                      "_unset_infra_mode")),
    ("torch._subclasses.fake_tensor", ("unset_fake_temporarily", "FakeTensorMode.__enter__",
                                       "FakeTensorMode.__exit__")),
    ("torch.fx.experimental.proxy_tensor", ("disable_proxy_modes_tracing",
                                            "ProxyTorchDispatchMode.__enter__",
                                            "ProxyTorchDispatchMode.__exit__")),
    ("torch._ops", ("OpOverload.redispatch",)),
    ("torch._C._autograd", ("_unsafe_set_version_counter",)),
    ("torch.autograd.grad_mode", ("_unsafe_preserve_version_counter.__exit__",)),
    # functorch's dispatch-key switches (R63c-2: FuncTorchBatched excluded by the step)
    ("torch._C._functorch", ("tls_set_vmap_excluded", "_set_dynamic_layer_keys_included")),
    *SETTERS_WITHOUT_GETTER,
)
"""(module, names): torch 2.13's switches that run an operator past the dispatch modes, or
take the trace's modes off the stack, or reset a tensor's version counter (which stands for
every change of a held tensor the step-state fingerprint does not list: R54a-3);
``Class.method`` names a method. Each is refused when
called from the train file's code (:func:`install`). ``TorchDispatchMode.__enter__`` /
``__exit__`` are refused only on an infra mode (the trace's fake or proxy mode, R50a-1
r50a_08): a mode of the train file's own enters and exits as ever."""

INFRA_ESCAPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch.utils._python_dispatch", ("TorchDispatchMode.__enter__", "TorchDispatchMode.__exit__")),
)
"""As :data:`ESCAPES`, refused only when ``self`` is an infra mode (``is_infra_mode()``: the
trace's fake or proxy mode taken off by its base class's method, R50a-1)."""

_SAVED: list[tuple[Any, str, Any]] = []
"""(owner, attribute, original) of every binding :func:`install` replaced."""
_WRAPPERS: dict[int, Any] = {}
"""Every wrapper :func:`install` made, by id (kept alive: an id is never reused)."""
_FOUND: list[str] = []
"""Every refusal's message, in order (the train file may catch the error: :func:`check`)."""


def _user_caller(frame: Any, names: set[str] | None) -> Any:
    """The frame whose call of a switch decides, from ``frame`` (the switch's caller) outward,
    when it runs the user's code (None when it runs torch's or the front end's, or there is
    none). Whose code a frame runs is :meth:`op_guard.Baseline.own_code`'s answer (the code
    object existed before the train file ran, in its own module's namespace), not its file
    name: code compiled under torch's file name is the user's (R50a-3, r50a_04). A frame of
    torch's, the front end's or the standard library's decides only when its code names the
    switch (``names``: every name it is bound under, in ``co_names``); one that calls it as a
    value it was handed is a trampoline (``tree_map(switch, ...)``, the ``torch.no_grad()``
    decorator's wrapper, an ``ExitStack`` callback: R50a-3, r50a_05 / r50a_06), and the frame
    that called the trampoline is looked at. ``names`` None (``__enter__`` / ``__exit__``, which
    a ``with`` statement calls without naming): the first frame of torch's or the front end's
    decides, past the standard library's."""
    from spec_lang.torch_frontend.op_guard import current_baseline, in_stdlib  # noqa: PLC0415

    base = current_baseline()
    while frame is not None:
        if not (base.own_code(frame) or _importing(frame)):
            return frame
        if names is None:
            if not in_stdlib(frame.f_code.co_filename):
                return None
        elif not names.isdisjoint(frame.f_code.co_names):
            return None
        frame = frame.f_back
    return None


def _importing(frame: Any) -> bool:
    """Whether ``frame`` runs code of a torch or front-end module while it is being imported
    (lazily, in the step: ``torch._inductor``'s modules from ``make_fx``'s decompositions; its
    top-level code, a class body, a function it calls)."""
    g = frame.f_globals
    name = g.get("__name__")
    mod = sys.modules.get(name) if type(name) is str else None
    return mod is not None and vars(mod) is g and name.startswith(("torch.", "spec_lang.")) \
        and getattr(getattr(mod, "__spec__", None), "_initializing", False) is True \
        and frame.f_code.co_filename == getattr(mod, "__file__", None)


def _wrap(orig: Any, name: str, path: str, names: set[str] | None,
          infra_only: bool = False) -> Any:
    """A function calling ``orig``, refusing a call from the user's code (``infra_only``: only
    on an infra dispatch mode, the method's ``self``; ``names``: :func:`_user_caller`'s). It
    keeps ``orig``'s name and doc but not ``orig`` itself (no ``__wrapped__``: round 50a
    handed it out, R50a-2)."""
    def escape(*a: Any, **k: Any) -> Any:
        if infra_only and not (a and getattr(a[0], "is_infra_mode", lambda: False)()):
            return orig(*a, **k)
        caller = _user_caller(sys._getframe(1), names)  # noqa: SLF001
        if caller is not None:
            from spec_lang.torch_frontend.thread_guard import user_line  # noqa: PLC0415

            mine = os.path.realpath(caller.f_code.co_filename) == os.path.realpath(path)
            line = caller.f_lineno if mine else user_line(path)
            _FOUND.append(f"{path}:{line}: the train file calls {name}, which " + (
                "resets a tensor's version counter: the next step could not be told from "
                "this one (R54a-3). Remove it" if "version_counter" in name else
                "changes a torch setting that has no getter: prove --torch cannot compare "
                "it between steps (R63c-1). Remove it" if name in _SETTERS else
                "runs operators past torch's dispatch modes: the capture's trace (make_fx, "
                "FakeTensorMode) would not see them while the real run executes them "
                "(R49e-1). Remove it; run the step's operators as ordinary torch calls"))
            raise PlanError(_FOUND[-1])
        return orig(*a, **k)

    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(escape, attr, getattr(orig, attr))
    _WRAPPERS[id(escape)] = escape
    return escape


def is_wrapper(fn: Any) -> bool:
    """Whether ``fn`` is one of :func:`install`'s wrappers (the tests)."""
    return id(fn) in _WRAPPERS


def install(path: str) -> None:
    """Replace every switch in :data:`ESCAPES`, at its module and at every binding of it in a
    loaded ``torch`` module, with a wrapper refusing the train file's calls (``path``: the
    train file, named in the message with the user's line). Call in the capture child before
    the train file is imported; :func:`uninstall` undoes it."""
    for modname, listed, infra_only in [*((m, n, False) for m, n in ESCAPES),
                                        *((m, n, True) for m, n in INFRA_ESCAPES)]:
        mod = importlib.import_module(modname)
        for dotted in listed:
            owner, _, name = (mod, "", dotted) if "." not in dotted else (
                getattr(mod, dotted.split(".")[0]), "", dotted.split(".")[1])
            orig = owner.__dict__.get(name) if isinstance(owner, type) else getattr(
                owner, name, None)
            if orig is None or is_wrapper(orig):
                continue
            dunder = name.startswith("__")
            names: set[str] | None = None if dunder else {name}
            wrapper = _wrap(orig, f"{modname}.{dotted}", path, names, infra_only)
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
                        names.add(key)      # (no_dispatch: torch._C._DisableTorchDispatch)


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
