"""State torch and the interpreter keep in C that a step can leave entered or set, read for the
step-state fingerprint (:func:`spec_lang.torch_frontend.process_state._c_state`): torch's
saved-tensor default hooks, its torch function and dispatch mode stacks, the current
``contextvars`` context, and the interpreter's and torch's settings (R12-5).

Every reader is bound when this module is imported, before the train file runs, and is a C
function (R61d-1, R62a-4: ``torch.overrides._get_current_function_mode_stack`` is Python and
looks up ``_len_torch_function_stack`` in its module when it runs, which a train file replaced
at import to hide a mode its step had entered). What a mode, a hook or a context variable
holds is read only where it can be read in full (round 62b: ``value_text.deep_text`` read a
function's, a class's, a bound method's object's or a ``torch.Generator``'s state only in
part, R62b-1..4): the tracer's own modes (``make_fx``'s
metadata and proxy modes, the fake tensor mode) by class, their tables growing with every op
traced; torch's default-device ``DeviceContext`` by its devices (R62a-5: ``cpu`` switched to
``cpu:0``), only while its attributes are exactly those torch sets; a context variable by its
name, identity and value when the value is None, a number, a string or bytes, or an exact tuple
of those (R62a-6; R62b-6: two variables of one name swapping values). Any other mode or value,
and any saved-tensor default hook set around the step, is unreadable (UNKNOWN, naming it): a
counter the train file keeps in a mode or a hook it entered at import (R62a-1, R62a-2) is not
read, so the step is not proved. (``pp_data_parallel.AutogradStateGuard`` is entered only
inside ``schedule.step``, never around a fingerprint.) decimal's own variable is left out (its
context is read by fields, ``process_state``), and so is numpy's ``format_options`` (read as
numpy's print settings there).
"""

from __future__ import annotations

import _contextvars
import decimal
import functools
import gc
import sys
import types
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, TorchFunctionMetadataMode

from spec_lang.torch_frontend.value_text import (
    _DATA, UNREADABLE, _data_text, _qual, module_dict, own_dict)

__all__ = ["AUTOCAST_DEVICES", "SETTINGS_READERS", "levels", "modes_entered", "plain_text",
           "torch_c_texts"]

_C = torch._C  # noqa: SLF001
_FN_LEN, _FN_AT = _C._len_torch_function_stack, _C._get_function_stack_at  # noqa: SLF001
_DSP_LEN, _DSP_AT = _C._len_torch_dispatch_stack, _C._get_dispatch_stack_at  # noqa: SLF001
_SAVED_HOOKS = _C._autograd._top_saved_tensors_default_hooks  # noqa: SLF001
_COPY_CONTEXT, _CONTEXT_ITEMS = _contextvars.copy_context, _contextvars.Context.items
_NEW_CONTEXT, _RUN, _VAR_GET = _contextvars.Context, _contextvars.Context.run, \
    _contextvars.ContextVar.get
# decimal's own variable, made here (before any step: its first ``getcontext`` adds it to the
# context) and left out of the variables' text: ``process_state`` reads its context's fields
_DECIMAL_CONTEXT = decimal.getcontext()
_OWN_VARS = frozenset({v for v, x in _CONTEXT_ITEMS(_COPY_CONTEXT()) if x is _DECIMAL_CONTEXT})
try:    # numpy 2's error state (a capsule; R63a-2: ``np.seterr`` at import put it in the context)
    from numpy._core._multiarray_umath import _extobj_contextvar as _NP_EXTOBJ  # noqa: E402
    _OWN_VARS |= {_NP_EXTOBJ}     # read by its fields in ``process_state`` (numpy's settings)
except ImportError:
    pass
_DEVICE, _DEVICE_REPR, _GET, _ITEMS = torch.device, torch.device.__repr__, dict.get, dict.items
from torch.utils._device import DeviceContext as _DEVICE_CONTEXT  # noqa: E402
_TRACER_MODES = frozenset({TorchFunctionMetadataMode, ProxyTorchDispatchMode, FakeTensorMode})

_FT_DEPTH = _C._functorch.get_dynamic_layer_stack_depth  # noqa: SLF001
_VMAP_IN, _VMAP_OUT = _C._vmapmode_increment_nesting, _C._vmapmode_decrement_nesting  # noqa
_AC_IN, _AC_OUT = _C.autocast_increment_nesting, _C.autocast_decrement_nesting
_DUAL_IN, _DUAL_OUT = _C._enter_dual_level, _C._exit_dual_level  # noqa: SLF001


def levels() -> tuple[int, int, int, bool]:
    """functorch's transform levels (vmap / grad / jvp, its dynamic layer stack), the legacy
    vmap mode's and autocast's nesting, and whether a forward-AD dual level is entered: state
    a step can leave entered for its next call (R63a-3: a vmap level pushed as the step
    returned and popped as it began). Those without a getter are read by a step in and
    straight back out, in C."""
    vmap = _VMAP_IN() - 1
    _VMAP_OUT()
    nest = _AC_IN() - 1
    _AC_OUT()
    try:
        dual = _DUAL_IN()
    except RuntimeError:          # "Nested forward mode AD is not supported": one is entered
        return _FT_DEPTH(), vmap, nest, True
    _DUAL_OUT(level=dual)
    return _FT_DEPTH(), vmap, nest, False


def _swapped(setter: Any, probe: Any) -> Any:
    """A setting whose setter answers the old value and has no getter: set to ``probe`` and
    straight back (R63c-1: TorchScript's profiling executor toggled by the step)."""
    old = setter(probe)
    setter(old)
    return old


#: Every device type torch keeps an autocast state for (R63a-1: xla's was toggled unread).
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "ipu", "hpu", "xla", "mps", "mtia", "privateuseone",
                    "maia")

#: The interpreter's and torch's settings, each a C getter (not torch's Python readers, which
#: look the getter up when they run: R61d-1). Items 3 and 4 are the trace and profile
#: functions (read by identity). R62a-3 added the fourteen torch getters after the cuDNN ones
#: and CPU autocast: a step toggling ``check_sparse_tensor_invariants`` was accepted; R62d-3
#: and R63a-1 the rest: every zero-argument getter of ``torch._C``, its ``_autograd`` and
#: ``_functorch`` answering a plain value but those named in
#: ``tests/torch_frontend/test_torch_c_state.py`` (deprecated aliases, counters that move on
#: their own), autocast for every device type, and the nesting levels (:func:`levels`).
SETTINGS_READERS = (
    gc.get_threshold, sys.getrecursionlimit, sys.getswitchinterval, sys.gettrace,
    sys.getprofile, torch.get_num_threads, torch.get_num_interop_threads,
    _C._get_deterministic_algorithms, _C._get_float32_matmul_precision,  # noqa: SLF001
    sys.get_int_max_str_digits, _C._get_warnAlways, torch.is_anomaly_enabled,  # noqa: SLF001
    torch.is_anomaly_check_nan_enabled, _C._get_mkldnn_enabled,  # noqa: SLF001
    _C._get_cudnn_enabled, _C._get_cudnn_benchmark, _C._get_cudnn_deterministic,  # noqa
    *(getattr(_C, n) for n in (
        "_check_sparse_tensor_invariants", "_get_deterministic_algorithms_warn_only",
        "_get_deterministic_fill_uninitialized_memory", "_is_multithreading_enabled",
        "_is_view_replay_enabled", "_is_fwd_grad_enabled", "_get_math_sdp_enabled",
        "_get_flash_sdp_enabled", "_get_mem_efficient_sdp_enabled",
        "_get_overrideable_sdp_enabled", "_get_mkldnn_deterministic", "_get_cudnn_allow_tf32",
        "_get_cublas_allow_tf32", "_get_graph_executor_optimize")),
    *(f for f in (getattr(_C, n, None) for n in (   # (R62d-3: twelve more a step could toggle)
        "_get_nnpack_enabled", "_get_cublas_allow_fp16_accumulation",
        "_get_cublas_allow_bf16_reduced_precision_reduction",
        "_get_cublas_allow_fp16_reduced_precision_reduction",
        "_get_cpu_allow_fp16_reduced_precision_reduction",
        "_get_math_sdp_allow_fp16_bf16_reduction", "_get_cudnn_sdp_enabled",
        "_get_fa3_sdp_enabled", "_get_backcompat_broadcast_warn", "_get_backcompat_keepdim_warn",
        "_get_dtensor_allow_implicit_replication", "_get_miopen_immediate",
        "_get_onednn_allow_tf32", "_get_qengine", "_get_autograd_fallback_mode",
        "_get_blas_preferred_backend", "_get_linalg_preferred_backend",
        "_get_rocm_fa_preferred_backend", "_get_sdp_priority_order",
        "_get_sm_carveout_experimental", "_is_grad_layout_enforcement_enabled",
        "_jit_texpr_fuser_enabled", "is_autocast_cache_enabled", "_is_torch_function_enabled",
        "_is_torch_function_all_disabled", "_get_default_device", "_is_xnnpack_enabled",
        "_get_cudnn_depthwise_kernel")) if f is not None),
    _C._autograd._saved_tensors_hooks_is_enabled,  # noqa: SLF001
    *(f for f in (getattr(m, n, None) for m, names in (   # (R63a-1: every plain-valued one)
        (_C, ("_is_default_mobile_cpu_allocator_set", "_is_torch_function_mode_enabled",
              "_is_tracing", "_jit_get_inline_everything_mode", "_jit_get_logging_option",
              "_jit_get_num_profiled_runs", "_jit_get_te_cuda_pointwise_block_count",
              "_jit_get_te_cuda_pointwise_block_size", "_jit_get_te_cuda_pointwise_loop_levels",
              "_jit_get_te_generate_block_code", "_jit_get_te_must_use_llvm_cpu",
              "_jit_get_tracer_state_warn", "_jit_is_onnx_log_enabled", "_jit_llga_enabled",
              "_jit_symbolic_shapes_test_mode_enabled", "_jit_texpr_dynamic_shape_enabled",
              "_jit_texpr_fallback_allowed", "_jit_texpr_reductions_enabled", "is_grad_enabled",
              "is_inference_mode_enabled", "_debug_only_are_vmap_fallback_warnings_enabled",
              "_accelerator_getAccelerator", "_accelerator_getAllocatorSettings",
              "_accelerator_hooks_get_current_device", "_is_flash_attention_available",
              "_llvm_enabled", "_get_caught_jit_exception_class_name",
              "_get_caught_jit_exception_original_msg", "_get_cpu_capability",
              "_get_graph_exec_group", "_get_max_operator_version",
              "_get_privateuse1_backend_name", "_get_thread_name", "_get_tracing_state",
              "_get_upgraders_map_size", "_get_version_calculator_flag",
              "_is_any_autocast_enabled", "_is_ck_sdpa_available")),
        (_C._autograd, ("_profiler_enabled", "_is_kineto_stopped")),  # noqa: SLF001
        (_C._functorch, ("_is_vmap_fallback_enabled", "get_inplace_requires_grad_allowed",
                         "get_single_level_autograd_function_allowed")))  # noqa: SLF001
        for n in names) if f is not None),
    *(functools.partial(f, d) for d in AUTOCAST_DEVICES
      for f in (_C.is_autocast_enabled, _C.get_autocast_dtype)),
    levels,
    # (R63c-1/-2: getters of other submodules, the dispatch keys' thread-local sets, and the
    # settings whose setter answers the old value, read by setting it back at once)
    *(f for f in (getattr(m, n, None) for m, names in (
        (_C, ("get_default_dtype", "_get_torch_function_state", "_only_lift_cpu_tensors",
              "_debug_get_fusion_group_inlining",
              "_dispatch_tls_local_include_set", "_dispatch_tls_local_exclude_set")),
        (getattr(_C, "_lazy", None), ("_get_force_fallback", "_get_symbolic_shape_mode")),
        (getattr(_C, "_distributed_c10d", None), ("get_debug_level", "_get_comm_profiling_name",
                                                  "_allow_inflight_collective_as_graph_input")))
        for n in names) if f is not None),
    *(functools.partial(_C._get_fp32_precision_getter, b, o) for b, o in (  # noqa: SLF001
        ("generic", "all"), *((b, o) for b in ("mkldnn", "cuda")
                              for o in ("all", "matmul", "conv", "rnn")))),
    *(functools.partial(_swapped, f, x) for f, x in (
        (_C._jit_set_profiling_executor, True), (_C._jit_set_profiling_mode, True),  # noqa
        (_C._jit_set_fusion_strategy, [("STATIC", 2)]), (_C._jit_set_autocast_mode, True),
        (_C._autograd._saved_tensors_hooks_set_tracing, False))))  # noqa: SLF001


def _device_context(m: Any, depth: int = 0) -> str | None:
    """A ``DeviceContext`` by its devices (and the one it replaced), or None when it holds
    anything else or nests past 4."""
    own = own_dict(m)
    if type(m) is not _DEVICE_CONTEXT or type(own) is not dict or depth > 4 or \
            not set(own) <= {"device", "old_device", "prev_mode"}:
        return None
    parts = []
    for k in ("device", "old_device"):
        x = _GET(own, k)
        if x is not None and type(x) is not _DEVICE:
            return None
        parts.append("-" if x is None else _DEVICE_REPR(x))
    prev = _GET(own, "prev_mode")
    inner = "-" if prev is None else _device_context(prev, depth + 1)
    return None if inner is None else f"DeviceContext({parts[0]},{parts[1]},{inner})"


def _mode_text(m: Any) -> str:
    """A mode on torch's function or dispatch stack (the module docstring)."""
    if type(m) in _TRACER_MODES:
        return _qual(type(m))
    return _device_context(m) or UNREADABLE + f"the {_qual(type(m))} mode entered around the step"


def modes_entered() -> list[str]:
    """The modes on torch's function and dispatch stacks now that :func:`_mode_text` cannot
    read (any but a plain ``DeviceContext``), and the functorch, legacy vmap and forward-AD
    levels entered (R63a-3): ``capture`` asks just before it traces, when every mode there is
    the train file's (R62d-1: a ``TorchFunctionMetadataMode`` of its own, entered at import,
    would pass for the tracer's by its class)."""
    depth, vmap, _, dual = levels()    # (R63a-3: and the transform levels, as modes)
    return [_qual(type(m)) for m in [*[_FN_AT(i) for i in range(_FN_LEN())],
                                     *[_DSP_AT(i) for i in range(_DSP_LEN())]]
            if _device_context(m) is None] + \
        [f"{n} {what}" for n, what in ((depth, "functorch transform level(s)"),
                                       (vmap, "legacy vmap level(s)"), (int(dual),
                                       "forward-AD dual level")) if n]


def plain_text(x: Any, depth: int = 0) -> str | None:
    """None, a number, a string or bytes by value, an exact tuple of those, an exact dict of
    string keys and such values (numpy's print options; R62d-2: a ``formatter`` function is
    not read by ``repr``); else None."""
    if x is None or type(x) in _DATA:
        return _data_text(x)
    if type(x) is tuple and depth < 4:
        parts = [plain_text(y, depth + 1) for y in tuple.__iter__(x)]
        return None if None in parts else "(" + ",".join(parts) + ")"
    if type(x) is dict and depth < 4:
        items = list(_ITEMS(x))
        parts = [plain_text(y, depth + 1) for _, y in items]
        if None in parts or any(type(k) is not str for k, _ in items):
            return None
        return "{" + ",".join(sorted(f"{k!r}:{t}" for (k, _), t in zip(items, parts))) + "}"
    return None


_NO_DEFAULT = object()


def _default(v: Any) -> Any:
    """A context variable's default: what it answers in an empty context (C calls only)."""
    try:
        return _RUN(_NEW_CONTEXT(), _VAR_GET, v)
    except LookupError:
        return _NO_DEFAULT


_MODULE_VARS: dict[int, Any] = {}     # context variables found in a module's globals


def _module_variable(v: Any) -> bool:
    """``v`` is a global of a loaded module (its default then read with that module: the
    user's by ``step_state``, a library's such as torch's config patches by identity)."""
    if id(v) in _MODULE_VARS:
        return True
    for m in list(sys.modules.values()):
        if issubclass(type(m), types.ModuleType) and any(
                y is v for y in list(dict.values(module_dict(m)))):
            _MODULE_VARS[id(v)] = v
            return True
    return False


def _variable_text(v: Any, x: Any) -> str:
    """``name@id=value/default``, each plain (R63b-2: a step counting in a list default made
    in a function); a module's variable's default by its identity."""
    d = _default(v)
    t, dt = plain_text(x), ("-" if d is _NO_DEFAULT else plain_text(d))
    if dt is None and (type(d) is object or _module_variable(v)):
        dt = f"{_qual(type(d))}@{id(d):x}"     # (a bare ``object()`` sentinel holds nothing:
        #                                         torch's config entries' defaults)
    if t is None or dt is None:
        return UNREADABLE + f"the context variable {v.name!r} holds a " \
            f"{_qual(type(x if t is None else d))}"
    return f"{v.name}@{id(v):x}={t}/{dt}"


# torch's settings kept in Python: the plain globals of ``torch.backends``' modules (R63a's
# r63a_04: ``torch.backends.mha.set_fastpath_enabled``) and the tensor print options (r63a_05:
# ``torch.set_printoptions``), read by value: other torch globals are not (torch keeps counters
# there, R11-1), so these are named. The namespaces bound here, at import, and those loaded
# under the names at a fingerprint (R63c-3: ``torch.backends.mha`` imported again and rebound)
_BACKENDS = tuple(sorted((n, m.__dict__) for n, m in list(sys.modules.items())
                         if n.startswith("torch.backends.") and m is not None))
# the keys plain at import: one holding anything else later is unreadable (R63c-4: the fast
# path switch set to a list the step appends to)
_PLAIN_KEYS = {n: frozenset(k for k, v in ns.items() if plain_text(v) is not None)
               for n, ns in _BACKENDS}
_SYS_MODULES, _BACKENDS_NS = sys.modules, torch.backends.__dict__
_TENSOR_STR_NS = torch._tensor_str.__dict__  # noqa: SLF001
_PRINT_OPTS_TYPE = type(torch._tensor_str.PRINT_OPTS)  # noqa: SLF001


def _backend_namespaces() -> list[tuple[str, dict]]:
    """(name, namespace) of ``torch.backends``' modules: as at import, as ``sys.modules`` holds
    them now, and as ``torch.backends`` names them now (each once)."""
    now = [(n, m) for n, m in list(_ITEMS(_SYS_MODULES)) if type(n) is str
           and n.startswith("torch.backends.")]
    now += [(f"torch.backends.{k}", m) for k, m in list(_ITEMS(_BACKENDS_NS))
            if type(k) is str and issubclass(type(m), types.ModuleType)]
    out, seen = list(_BACKENDS), {id(ns) for _, ns in _BACKENDS}
    for n, m in now:
        ns = module_dict(m) if issubclass(type(m), types.ModuleType) else None
        if ns is not None and id(ns) not in seen:
            seen.add(id(ns))
            out.append((n, ns))
    return out


def torch_python_settings() -> str:
    """The plain globals of ``torch.backends``' modules and torch's tensor print options, as
    one text (UNREADABLE when a key plain at import holds anything else, or the print options
    were replaced by another kind of object)."""
    parts = []
    for n, ns in _backend_namespaces():
        plain = _PLAIN_KEYS.get(n, frozenset())
        for k, v in list(_ITEMS(ns)):
            t = plain_text(v)
            if t is None and k in plain:
                t = UNREADABLE + f"{n}.{k} holds a {_qual(type(v))}"
            if t is not None and type(k) is str and not k.startswith("__"):
                parts.append(f"{n}.{k}={t}")
    opts = _GET(_TENSOR_STR_NS, "PRINT_OPTS")
    own = own_dict(opts)
    text = plain_text(own) if type(opts) is _PRINT_OPTS_TYPE and type(own) is dict else None
    return ",".join(sorted(parts)) + ";print options " + (
        text if text is not None else UNREADABLE + "torch's print options were replaced")


def torch_c_texts() -> dict[str, str]:
    """``{what: text}`` for the saved-tensor hooks, the two mode stacks (bottom first) and the
    current context's variables (sorted); a text holding :data:`value_text.UNREADABLE` makes
    the entry unknown (the module docstring)."""
    hooks = _SAVED_HOOKS(True)
    out = {
        "torch saved_tensors_hooks": "none" if hooks is None else
        UNREADABLE + "saved-tensor default hooks set around the step",
        "torch function mode stack": ",".join([_mode_text(_FN_AT(i)) for i in range(_FN_LEN())]),
        "torch dispatch mode stack": ",".join(
            [_mode_text(_DSP_AT(i)) for i in range(_DSP_LEN())]),
        "the context variables": ",".join(sorted(
            [_variable_text(v, x) for v, x in _CONTEXT_ITEMS(_COPY_CONTEXT())
             if v not in _OWN_VARS])),
        "torch's Python settings": torch_python_settings(),
    }
    # an entry with an unreadable part is unreadable as a whole (step_state.state_changes)
    return {k: t if UNREADABLE not in t else UNREADABLE + t.replace(UNREADABLE, "")
            for k, t in out.items()}
