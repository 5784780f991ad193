"""The torch versions the capture layer supports, and the private torch APIs it relies on.

The PyTorch front end reads the user's program through APIs that carry no stability promise
(``FRONTEND.md``, design point 8): the fake process group, DTensor's local-tensor internals, the
functional collectives' op names, ``make_fx`` options, FSDP2 state and the pipelining schedules'
action lists. They change between releases, so the capture layer names the releases it was
built and tested against and refuses the others with one line (exit 3, bad input) instead of
producing a graph whose meaning may have shifted. :data:`PRIVATE_APIS` lists every private API
by dotted name; ``tests/torch_frontend/test_version.py`` resolves each one, so a torch upgrade
fails there first. ``check_torch`` runs in the tracing process before the train file is read.
"""

from __future__ import annotations

import importlib

from spec_lang.errors import PlanError

__all__ = ["SUPPORTED_TORCH", "PRIVATE_APIS", "UnsupportedTorch", "check_torch", "resolve"]

SUPPORTED_TORCH: tuple[str, ...] = ("2.13.0",)
"""Release numbers (``torch.__version__`` without the local ``+cpu`` part) the front end
accepts. Each was measured on this project's machine (``FRONTEND.md``)."""

PRIVATE_APIS: tuple[str, ...] = (
    # a one-process process group of any world size (world.py)
    "torch.testing._internal.distributed.fake_pg.FakeStore",
    # DTensor's local shard, read to lift parameters and gradients as rank-local (capture.py,
    # dataparallel.py)
    "torch.distributed.tensor.DTensor._local_tensor",
    # FSDP2 over TP stores a _StridedShard placement (dataparallel.py)
    "torch.distributed.tensor.placement_types._StridedShard",
    # the current mesh that fully_shard / replicate default to (dataparallel.py)
    "torch.distributed.device_mesh._mesh_resources",
    # functional collectives that model FSDP2 / replicate in the traced step (dataparallel.py)
    "torch.distributed._functional_collectives.all_gather_tensor",
    "torch.distributed._functional_collectives.reduce_scatter_tensor",
    "torch.distributed._functional_collectives.all_reduce",
    "torch.distributed._functional_collectives.wait_tensor",
    # the collective ops the per-rank graph carries (rules_collectives.py)
    "torch.ops._c10d_functional.all_gather_into_tensor.default",
    "torch.ops._c10d_functional.reduce_scatter_tensor.default",
    "torch.ops._c10d_functional.all_reduce.default",
    "torch.ops._c10d_functional.wait_tensor.default",
    "torch.ops.c10d.allreduce_.default",
    # the module paths fully_shard / replicate are patched at (dataparallel.py)
    "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
    "torch.distributed._composable.replicate_with_fsdp.replicate",
    # the DDP-based replicate's class (dataparallel.py, R46e-1)
    "torch.distributed._composable.replicate.DDP",
    # FSDP2's cast of forward inputs and outputs over nested containers (fsdp_mixed_precision.py)
    "torch.distributed.utils._apply_to_tensors",
    # the C descriptors the guard of the stand-in's parameter views wraps (fsdp_grads.py, R47a-5)
    "torch._C.TensorBase.grad",
    "torch._C.TensorBase._grad",
    "torch._C.TensorBase.is_leaf",
    "torch._C.TensorBase.grad_fn",
    "torch._C.TensorBase._grad_fn",
    # the caches of the classes fully_shard / replicate_with_fsdp make (fsdp_methods.py, R47c-3)
    "torch.distributed.fsdp._fully_shard._fully_shard.get_cls_to_fsdp_cls",
    "torch.distributed._composable.replicate_with_fsdp.cls_to_replicate_cls",
    # contract's registry and state keys, the state classes it makes (contract_state.py)
    "torch.distributed._composable.contract.REGISTRY_KEY",
    "torch.distributed._composable.contract.STATE_KEY",
    "torch.distributed._composable.contract.RegistryItem",
    "torch.distributed.fsdp._fully_shard._fsdp_state.FSDPState",
    "torch.distributed._composable.replicate._ReplicateState",
    "torch.distributed._composable.replicate_with_fsdp._ReplicateState",
    # whether the running backward accumulates into a leaf (fsdp_grads.py, R44c-2)
    "torch._C._will_engine_execute_node",
    # parallelize_module and the styles, wrapped to record the user's lines (styles.py)
    "torch.distributed.tensor.parallel.api.parallelize_module",
    "torch.distributed.tensor.parallel.style.ParallelStyle",
    # make_fx stack traces that keep the user's frames (capture.py)
    "torch.fx.proxy._register_stack_trace_anchor",
    # the CPU flash-attention kernels SDPA dispatches to (rules_attention.py)
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
    # pipelining (pp_capture.py): the stage / schedule base classes and the traced Pipe (what
    # is refused), the static/dynamic vote's result set (DYNAMIC), torch's metadata inference
    # traced with its metadata transfers answered from the previous stage's trace, the
    # executed events recorded, the transfers in the graph (pp_merge.py), fake cpu inputs
    "torch.distributed.pipelining.stage._PipelineStageBase",
    "torch.distributed.pipelining.stage._PipelineStageBase.forward_one_chunk",
    "torch.distributed.pipelining.stage._PipelineStageBase.backward_one_chunk",
    "torch.distributed.pipelining.stage._PipelineStageBase.perform_reduce_grad",
    # a stage module wrapped by fully_shard's stand-in (pp_data_parallel.py)
    "torch.distributed.pipelining.stage._PipelineStageBase.backward_maybe_with_nosync",
    "torch.distributed.pipelining.stage._PipelineStageBase.scale_grads",
    "torch.distributed.pipelining.stage.stage_backward",
    "torch.distributed.pipelining.stage.PipelineStage._prepare_forward_infra",
    "torch.distributed.pipelining.stage.PipelineStage._recv_meta",
    "torch.distributed.pipelining.stage.PipelineStage._send_meta",
    "torch.distributed.pipelining.stage.PipelineStage._forward_metadata_inference",
    "torch.distributed.pipelining.stage.PipelineStage._backward_metadata_inference",
    "torch.distributed.pipelining._utils._TensorMeta",
    "torch.distributed.pipelining._utils._StageForwardMeta",
    "torch.distributed.pipelining._utils._StageBackwardMeta",
    "torch.distributed.pipelining._utils._derive_grad_metas",
    "torch.distributed.pipelining.schedules._PipelineSchedule",
    "torch.distributed.pipelining.schedules._PipelineSchedule._warmup_p2p",
    "torch.distributed.pipelining.schedules._batch_p2p",
    "torch.distributed.pipelining.schedules.PipelineScheduleSingle.step",
    "torch.distributed.pipelining._utils.InferenceMode",
    "torch.distributed.pipelining._IR.Pipe.from_tracing",
    "torch.fx.experimental.proxy_tensor.disable_proxy_modes_tracing",
    "torch._subclasses.fake_tensor.FakeTensorMode",
    "torch.ops.c10d.send.default",
    "torch.ops.c10d.recv_.default",
    # what runs inside a collective (op_guard.py): the tracer's graph, the mode stacks, the
    # state torch's collective code reads
    "torch.fx.experimental.proxy_tensor.get_proxy_mode",
    "torch.overrides._get_current_function_mode_stack",
    "torch.utils._python_dispatch._get_current_dispatch_mode_stack",
    "torch.distributed.distributed_c10d._world",
    "torch.distributed.distributed_c10d._World",
    "torch._C._distributed_c10d.Work",
    # activation checkpointing under FSDP2 / replicate: torch's wrapper type (its own training
    # flag: wrapper_names), whether the autograd engine is running and torch's recomputation
    # functions (recompute.in_recomputation)
    "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.CheckpointWrapper",
    "torch._C._current_graph_task_id",
    "torch.utils.checkpoint._checkpoint_without_reentrant_generator",
    "torch.utils.checkpoint.CheckpointFunction.backward",
    # whether a backward pass accumulates into .grad (recompute.reduction_refused)
    "torch.autograd.graph._engine_run_backward",
    # selective activation checkpointing's dispatch modes, taken off the stack for the
    # recomputation's gather (recompute.outside_selective_checkpoint)
    "torch.utils.checkpoint._CachingTorchDispatchMode",
    "torch.utils.checkpoint._CachedTorchDispatchMode",
    "torch.utils._python_dispatch._get_current_dispatch_mode",
    "torch.utils._python_dispatch._pop_mode",
    "torch.utils._python_dispatch._push_mode",
    # SAC's "under a proxy mode: save everything" decision, set to eager's (eager_paths)
    "torch.utils.checkpoint._is_compiling",
    # SAC's mark of an operator it recomputes (recompute.saved_alias_refused)
    "torch.utils.checkpoint._RECOMPUTE",
    # what a stage held, tracked by weak reference (pp_guard.held_by)
    "torch.distributed.pipelining.stage._RecvInfo",
)


class UnsupportedTorch(PlanError):
    """The installed torch is not one of :data:`SUPPORTED_TORCH` (exit 3)."""


def check_torch(version: str | None = None) -> str:
    """Return the installed (or given) torch release if supported.

    Raises:
        UnsupportedTorch: torch is missing or its release is not in :data:`SUPPORTED_TORCH`.
    """
    if version is None:
        try:
            import torch
        except ImportError:
            raise UnsupportedTorch("prove --torch: torch is not installed; install torch=="
                                   f"{SUPPORTED_TORCH[-1]}") from None
        version = torch.__version__
    release = version.split("+", 1)[0]
    if release not in SUPPORTED_TORCH:
        raise UnsupportedTorch(f"prove --torch: torch {version} is not supported (the capture "
                               f"layer uses private torch APIs tested with "
                               f"{', '.join(SUPPORTED_TORCH)}); install torch=={SUPPORTED_TORCH[-1]}")
    return release


def resolve(dotted: str) -> object:
    """The object a :data:`PRIVATE_APIS` entry names (module import, then attributes).

    Raises:
        ImportError / AttributeError: the API is gone in this torch.
    """
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)
