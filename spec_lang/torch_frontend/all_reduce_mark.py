"""Which ``c10d.allreduce_`` nodes ``dist.all_reduce`` issued, called plainly, and waited
(adversarial rounds 28 and 29: R28-3, R29-1).

``dist.all_reduce`` waits the work of the all-reduce it issues (synchronous call), so the
lowering may take the tensor as reduced right after the node. ``ProcessGroup.allreduce`` or
``torch.ops.c10d.allreduce_`` called directly return a work nobody is known to wait, and the
node's ``async_op`` flag says nothing about it. Nor does a node recorded *while*
``dist.all_reduce`` ran: a duck-typed ``group=`` whose ``allreduce`` forwards to the real
process group and returns no work (``dist.all_reduce`` then waits nothing), or a
``TorchFunctionMode`` of the train file, to which ``dist.all_reduce`` hands itself
(``handle_torch_function``) and which issues its own unwaited all-reduce (R29-1). So
:func:`marking_all_reduce` marks a node only when the call was plain: ``group`` is ``None`` or
torch's own ``ProcessGroup``, no torch function mode but ``make_fx``'s own is active, the
tensor's class does not override ``__torch_function__``, exactly one all-reduce was recorded
and it reduces the tensor given, and :mod:`op_guard` found nothing of the train file running
inside the call (R30c-1). :func:`unmarked_all_reduces` lists the others (refused).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["ISSUED_BY", "NOT_PLAIN", "marking_all_reduce", "unmarked_all_reduces",
           "plain_call", "foreign_modes", "unmarked_message"]

ISSUED_BY = "shardproof: issued by dist.all_reduce"
"""The mark :func:`marking_all_reduce` leaves in a ``c10d.allreduce_`` node's meta."""

NOT_PLAIN = "shardproof: what ran inside dist.all_reduce"
"""What :mod:`op_guard` found inside the call that recorded an unmarked node (its meta)."""


def foreign_modes() -> list[str]:
    """The torch function and dispatch modes active now that are not the tracer's own
    (``make_fx``'s metadata and proxy modes, the fake tensor mode, the guard of a
    ``fully_shard`` pipeline stage): a mode of the train file
    sees every op of a collective or transfer and can answer it, e.g. with a work that is
    already completed while the real one still runs (adversarial round 30, R30-1)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, TorchFunctionMetadataMode
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from spec_lang.torch_frontend.pp_data_parallel import AutogradStateGuard

    ours = (TorchFunctionMetadataMode, ProxyTorchDispatchMode, FakeTensorMode,
            AutogradStateGuard)
    return [type(m).__qualname__ for m in [*_get_current_function_mode_stack(),
                                           *_get_current_dispatch_mode_stack()]
            if type(m) not in ours]


def plain_call(tensor: Any, group: Any) -> bool:
    """Whether ``dist.all_reduce(tensor, group=group)`` runs torch's own code to the end:
    ``group`` None or a ``ProcessGroup`` (exactly), no torch function or dispatch mode but the
    tracer's own (:func:`foreign_modes`), and a tensor whose class overrides neither
    ``__torch_function__`` nor ``__torch_dispatch__`` (a fake tensor's is the tracer's)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.distributed import ProcessGroup

    if group is not None and type(group) is not ProcessGroup:
        return False
    if foreign_modes():
        return False
    td = getattr(type(tensor), "__torch_dispatch__", None)
    td = getattr(td, "__func__", td)
    if td is not None and td not in (getattr(torch.Tensor.__torch_dispatch__, "__func__",
                                             torch.Tensor.__torch_dispatch__),
                                     getattr(FakeTensor.__torch_dispatch__, "__func__",
                                             FakeTensor.__torch_dispatch__)):
        return False
    tf = getattr(type(tensor), "__torch_function__", None)
    tf = getattr(tf, "__func__", tf)
    return tf is torch._C._disabled_torch_function_impl \
        or tf is torch.Tensor.__torch_function__.__func__


def marking_all_reduce(all_reduce: Any, guard: Callable[[], None] | None = None) -> Any:
    """``dist.all_reduce`` marking the ``c10d.allreduce_`` node it records while traced, when
    the call is plain (:func:`plain_call`) and that node reduces the tensor given. ``guard``:
    checks torch as the train file left it before the call (raises ``PlanError``)."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode, get_proxy_slot

    from spec_lang.torch_frontend.op_guard import namespaces, tampered, watching

    # torch's name and signature (a TorchFunctionMode of the train file may pick the call by
    # ``func.__name__``, and must pick it here as in the real run)
    @functools.wraps(all_reduce)
    def wrapped(tensor: Any, *a: Any, **k: Any) -> Any:
        mode = get_proxy_mode()
        graph = getattr(getattr(mode, "tracer", None), "graph", None)
        n0 = len(graph.nodes) if graph is not None else 0
        plain = plain_call(tensor, k.get("group", a[1] if len(a) > 1 else None))
        try:        # the tensor's node now (the in-place all-reduce gives it a new one)
            node = get_proxy_slot(tensor, mode.tracer).proxy.node if graph is not None else None
        except (KeyError, AttributeError, RuntimeError):
            node = None
        if guard is not None:
            guard()
        # what runs inside the call: checked at every node it records, and before and after
        # it (a mode the train file enters inside the call: adversarial round 30c, R30c-1)
        before = [f"{w} before the call" for w in tampered()] if graph is not None else []
        classes = namespaces()
        found: list[str] = []          # at the ops it records first (the most telling)
        with watching(found):
            out = all_reduce(tensor, *a, **k)
        if graph is None:
            return out
        found += before + [f"{w} after the call" for w in tampered(before=classes)]
        new = [n for n in list(graph.nodes)[n0:] if str(n.target) == "c10d.allreduce_.default"]
        if plain and not found and len(new) == 1 and node is not None \
                and isinstance(new[0].args[0], (list, tuple)) and list(new[0].args[0]) == [node]:
            new[0].meta[ISSUED_BY] = True
        elif plain and found:       # (not plain: the refusal says why already)
            for n in new:
                n.meta[NOT_PLAIN] = found[0]
        return out
    return wrapped


def unmarked_all_reduces(gm: Any) -> list[Any]:
    """The ``c10d.allreduce_`` nodes of ``gm`` that a plain ``dist.all_reduce`` did not issue."""
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and str(n.target) == "c10d.allreduce_.default" and not n.meta.get(ISSUED_BY)]


def unmarked_message(node: Any, site: str) -> str:
    """The refusal of an unmarked ``c10d.allreduce_`` node recorded at ``site`` (file:line)."""
    why = node.meta.get(NOT_PLAIN)
    if why:
        return (f"{site}: dist.all_reduce did not run as torch ships it: {why}; where its work "
                "is waited is not traced (a mode of the train file, a hook or a trace function "
                "can answer it with a completed work): leave torch and torch.distributed as "
                "torch ships them while the step runs")
    return (f"{site}: an all-reduce issued other than by a plain dist.all_reduce "
            "(ProcessGroup.allreduce or torch.ops.c10d called directly, a group= that is not a "
            "torch ProcessGroup, a torch function or dispatch mode of the train file or a "
            "tensor subclass taking over the call: where its work is waited is not traced): "
            "call dist.all_reduce on a tensor and a ProcessGroup")
