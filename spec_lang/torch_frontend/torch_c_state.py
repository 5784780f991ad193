"""State torch and the interpreter keep in C that a step can leave entered or set, read for the
step-state fingerprint (:func:`spec_lang.torch_frontend.process_state._c_state`): torch's
saved-tensor default hooks, its torch function and dispatch mode stacks, the current
``contextvars`` context, and the interpreter's and torch's settings (R12-5).

Every reader is bound when this module is imported, before the train file runs, and is a C
function (R61d-1, R62a-4: ``torch.overrides._get_current_function_mode_stack`` is Python and
looks up ``_len_torch_function_stack`` in its module when it runs, which a train file replaced
at import to hide a mode its step had entered). What a mode, a hook or a context variable
holds is read with :func:`value_text.deep_text` (its attributes, closure cells and defaults,
nested): a counter kept in a mode entered at import (R62a-1), in a hook's ``__dict__``
(R62a-2), in torch's default-device ``DeviceContext`` switched between ``cpu`` and ``cpu:0``
(R62a-5) or in a context variable nothing else holds (R62a-6) is a change. The tracer's own
modes (``make_fx``'s metadata and proxy modes, the fake tensor mode) are read by class: their
tables grow with every op traced. (The guard of a ``fully_shard`` pipeline stage,
``pp_data_parallel.AutogradStateGuard``, is entered only inside ``schedule.step``, never
around a fingerprint.)
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

from spec_lang.torch_frontend.value_text import _ident, _qual, deep_text, own_dict

__all__ = ["SETTINGS_READERS", "torch_c_texts"]

_C = torch._C  # noqa: SLF001
_FN_LEN, _FN_AT = _C._len_torch_function_stack, _C._get_function_stack_at  # noqa: SLF001
_DSP_LEN, _DSP_AT = _C._len_torch_dispatch_stack, _C._get_dispatch_stack_at  # noqa: SLF001
_SAVED_HOOKS = _C._autograd._top_saved_tensors_default_hooks  # noqa: SLF001
_COPY_CONTEXT, _CONTEXT_ITEMS = _contextvars.copy_context, _contextvars.Context.items
# decimal's own variable, made here (before any step: its first ``getcontext`` adds it to the
# context) and left out of the variables' text: ``process_state`` reads its context's fields
_DECIMAL_CONTEXT = decimal.getcontext()
_DECIMAL_VAR = next((v for v, x in _CONTEXT_ITEMS(_COPY_CONTEXT()) if x is _DECIMAL_CONTEXT),
                    None)
_DEVICE, _DEVICE_REPR, _DICT_VALUES = torch.device, torch.device.__repr__, dict.values
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
    functools.partial(_C.get_autocast_dtype, "cpu"))


def _mode_text(m: Any) -> str:
    """A mode on torch's function or dispatch stack: the tracer's own by class, any other (the
    train file's; torch's default-device ``DeviceContext``) with everything it holds, and the
    devices among its own attributes by value (``deep_text`` reads a ``torch.device``, a C
    object, by identity; R62a-5 switched ``cpu`` and ``cpu:0``)."""
    if type(m) in _TRACER_MODES:
        return _qual(type(m))
    own = own_dict(m)
    devices = [_DEVICE_REPR(x) for x in _DICT_VALUES(own) if type(x) is _DEVICE] \
        if type(own) is dict else []
    return f"{_qual(type(m))}:{deep_text(m)}:{devices}"


def torch_c_texts() -> dict[str, str]:
    """``{what: text}`` for the saved-tensor hooks, the two mode stacks (bottom first) and the
    current context's variables (by name, identity and value, sorted). A text may hold
    :data:`value_text.TOO_DEEP`; the caller makes it unreadable."""
    hooks = _SAVED_HOOKS(True)
    return {
        "torch saved_tensors_hooks": "none" if hooks is None else
        ",".join([_ident(h) + ":" + deep_text(h) for h in hooks]),
        "torch function mode stack": ",".join([_mode_text(_FN_AT(i)) for i in range(_FN_LEN())]),
        "torch dispatch mode stack": ",".join(
            [_mode_text(_DSP_AT(i)) for i in range(_DSP_LEN())]),
        "the context variables": repr(sorted(
            [f"{v.name}:{_ident(v)}={deep_text(x)}" for v, x in _CONTEXT_ITEMS(_COPY_CONTEXT())
             if v is not _DECIMAL_VAR])),
    }
