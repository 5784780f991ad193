"""State torch and the interpreter keep in C that a step can leave entered or set, read for the
step-state fingerprint (:func:`spec_lang.torch_frontend.process_state._c_state`): torch's
saved-tensor default hooks, its torch function and dispatch mode stacks, the current
``contextvars`` context, and the interpreter's and torch's settings (R12-5).

Every reader is bound when this module is imported, before the train file runs, and is a C
function (R61d-1, R62a-4: ``torch.overrides._get_current_function_mode_stack`` is Python and
looks up ``_len_torch_function_stack`` in its module when it runs, which a train file replaced
at import to hide a mode its step had entered). What a mode, a hook or a context variable
holds is read only where it can be read in full (round 62b: ``value_text.deep_text`` reads a function's, a class's, a bound method's object's or
a ``torch.Generator``'s state only in part, R62b-1..4): the tracer's own modes (``make_fx``'s
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
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, TorchFunctionMetadataMode

from spec_lang.torch_frontend.value_text import _DATA, UNREADABLE, _data_text, _qual, own_dict

__all__ = ["SETTINGS_READERS", "modes_entered", "plain_text", "torch_c_texts"]

_C = torch._C  # noqa: SLF001
_FN_LEN, _FN_AT = _C._len_torch_function_stack, _C._get_function_stack_at  # noqa: SLF001
_DSP_LEN, _DSP_AT = _C._len_torch_dispatch_stack, _C._get_dispatch_stack_at  # noqa: SLF001
_SAVED_HOOKS = _C._autograd._top_saved_tensors_default_hooks  # noqa: SLF001
_COPY_CONTEXT, _CONTEXT_ITEMS = _contextvars.copy_context, _contextvars.Context.items
# decimal's own variable, made here (before any step: its first ``getcontext`` adds it to the
# context) and left out of the variables' text: ``process_state`` reads its context's fields
_DECIMAL_CONTEXT = decimal.getcontext()
_OWN_VARS = frozenset({v for v, x in _CONTEXT_ITEMS(_COPY_CONTEXT()) if x is _DECIMAL_CONTEXT})
_DEVICE, _DEVICE_REPR, _GET, _ITEMS = torch.device, torch.device.__repr__, dict.get, dict.items
from torch.utils._device import DeviceContext as _DEVICE_CONTEXT  # noqa: E402
_TRACER_MODES = frozenset({TorchFunctionMetadataMode, ProxyTorchDispatchMode, FakeTensorMode})

#: The interpreter's and torch's settings, each a C getter (not torch's Python readers, which
#: look the getter up when they run: R61d-1). Items 3 and 4 are the trace and profile
#: functions (read by identity). R62a-3 added the fourteen torch getters after the cuDNN ones
#: and CPU autocast: a step toggling ``check_sparse_tensor_invariants`` was accepted.
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
    functools.partial(_C.is_autocast_enabled, "cpu"),
    functools.partial(_C.get_autocast_dtype, "cpu"),
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
    _C._autograd._saved_tensors_hooks_is_enabled)  # noqa: SLF001


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
    read (any but a plain ``DeviceContext``): ``capture`` asks just before it traces, when
    every mode there is the train file's (R62d-1: a ``TorchFunctionMetadataMode`` of its own,
    entered at import, would pass for the tracer's by its class)."""
    return [_qual(type(m)) for m in [*[_FN_AT(i) for i in range(_FN_LEN())],
                                     *[_DSP_AT(i) for i in range(_DSP_LEN())]]
            if _device_context(m) is None]


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


def _variable_text(v: Any, x: Any) -> str:
    t = plain_text(x)
    return f"{v.name}@{id(v):x}=" + (t if t is not None else UNREADABLE +
                                     f"the context variable {v.name!r} holds a {_qual(type(x))}")


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
    }
    # an entry with an unreadable part is unreadable as a whole (step_state.state_changes)
    return {k: t if UNREADABLE not in t else UNREADABLE + t.replace(UNREADABLE, "")
            for k, t in out.items()}
