"""spec_lang: the traced tensor DSL of shardproof (specs, SPMD plans, autodiff, models).

Public API, grouped by module (``docs/dsl.md`` is the reference; a test keeps the two in sync).

The names are imported on first use (PEP 562 ``__getattr__``), not when the package is: the
trusted checker reads terms with :mod:`spec_lang.term` and :mod:`spec_lang.evaluate` alone and
must not load the tracing half of the DSL (``docs/trusted-base.md``). ``from spec_lang import
ops, Spec`` and ``spec_lang.load`` work as before.
"""

import importlib
from typing import Any

# eager, and light (spec_lang.load imports the tracer when called): the name ``spec_lang.load``
# must stay the function even after the submodule of that name is imported
from spec_lang.load import load

# public name -> the module defining it (the table __getattr__ imports from; fixed, never user
# input)
_EXPORTS = {
    **dict.fromkeys(("backward", "grad", "lower", "zeros_like"), "autodiff"),
    **dict.fromkeys((
        "PRIMITIVES", "REGIONS", "all_gather", "all_reduce", "broadcast", "collectives_table",
        "copy_to_tp_region", "gather_from_sp_region", "gather_from_tp_region",
        "reduce_from_tp_region", "reduce_scatter", "reduce_scatter_to_sp_region", "region",
        "scatter_to_tp_region"), "collectives"),
    "Dim": "dims",
    **dict.fromkeys(("PlanError", "SpecError", "SpecLangError"), "errors"),
    **dict.fromkeys(("Iteration", "build_problem", "trace_plan", "trace_spec"), "iteration"),
    "Mesh": "mesh",
    **dict.fromkeys((
        "add", "axis_size", "cast", "causal_mask", "chunk", "chunks", "concat", "const",
        "cross_entropy", "cross_entropy_per_token", "dim_size", "div", "einsum", "embedding",
        "erf", "exp", "gelu", "layer_norm", "log", "log_softmax", "logsumexp", "matmul", "max",
        "maximum", "mean", "mul", "neg", "one_hot", "pow", "rank", "rank_const", "recip",
        "rename", "rms_norm", "rope", "rope_cos", "rope_sin", "rsqrt", "sigmoid", "silu",
        "softmax", "sqrt", "stop_gradient", "sub", "sum", "tanh", "transpose", "where"), "ops"),
    **dict.fromkeys(("SGD", "Adam", "AdamW", "InitStep", "ParamGroups", "grad_or_none"), "optim"),
    "Muon": "muon",
    "Ownership": "ownership",
    **dict.fromkeys(("megatron_param_groups", "weight_decay_groups"), "param_groups"),
    **dict.fromkeys(("Accumulation", "Pipeline", "stage"), "pipeline"),
    **dict.fromkeys(("Partial", "Replicate", "Shard", "lineage"), "placement"),
    **dict.fromkeys(("Loss", "Plan", "microbatches"), "plan"),
    **dict.fromkeys(("Goal", "Problem"), "problem"),
    **dict.fromkeys(("gpipe", "interleaved_one_f_one_b", "one_f_one_b"), "schedules"),
    **dict.fromkeys(("Data", "Params", "Spec", "index", "mask", "positive", "real"), "spec"),
    "Tensor": "tensor",
    **dict.fromkeys(("Axis", "Binding"), "term"),
}
# submodules reachable as attributes (``spec_lang.ops``) before anything imported them
_SUBMODULES = frozenset({
    "accumulation", "autodiff", "collectives", "cp", "dims", "dtensor", "errors", "evaluate",
    "exact_numbers", "hooks", "iteration", "load", "mesh", "models", "muon", "ops", "optim",
    "ownership", "param_groups", "partial", "pipeline", "placement", "plan", "plans", "positions",
    "problem",
    "rng", "schedules", "spec", "tensor", "term", "views",
})


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is not None:
        value = getattr(importlib.import_module(f"spec_lang.{mod}"), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"spec_lang.{name}")
    raise AttributeError(f"module 'spec_lang' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))  # noqa: PLE0605


__all__ = [
    # autodiff.py
    "backward", "grad", "lower", "zeros_like",
    # collectives.py
    "PRIMITIVES", "REGIONS", "all_gather", "all_reduce", "broadcast", "collectives_table",
    "copy_to_tp_region", "gather_from_sp_region", "gather_from_tp_region",
    "reduce_from_tp_region", "reduce_scatter", "reduce_scatter_to_sp_region", "region",
    "scatter_to_tp_region",
    # dims.py
    "Dim",
    # errors.py
    "PlanError", "SpecError", "SpecLangError",
    # iteration.py
    "Iteration", "build_problem", "trace_plan", "trace_spec",
    # load.py
    "load",
    # mesh.py
    "Mesh",
    # ops.py
    "add", "axis_size", "cast", "causal_mask", "chunk", "chunks", "concat", "const",
    "cross_entropy", "cross_entropy_per_token", "dim_size", "div", "einsum", "embedding", "erf",
    "exp",
    "gelu", "layer_norm", "log", "log_softmax", "logsumexp", "matmul", "max", "maximum", "mean",
    "mul", "neg", "one_hot", "pow", "rank", "rank_const", "recip", "rename", "rms_norm", "rope",
    "rope_cos", "rope_sin", "rsqrt", "sigmoid", "silu", "softmax", "sqrt", "stop_gradient", "sub",
    "sum", "tanh", "transpose", "where",
    # muon.py
    "Muon",
    # optim.py
    "SGD", "Adam", "AdamW", "InitStep", "ParamGroups", "grad_or_none",
    # ownership.py
    "Ownership",
    # param_groups.py
    "megatron_param_groups", "weight_decay_groups",
    # pipeline.py
    "Accumulation", "Pipeline", "stage",
    # placement.py
    "Partial", "Replicate", "Shard", "lineage",
    # plan.py
    "Loss", "Plan", "microbatches",
    # problem.py
    "Goal", "Problem",
    # schedules.py
    "gpipe", "interleaved_one_f_one_b", "one_f_one_b",
    # spec.py
    "Data", "Params", "Spec", "index", "mask", "positive", "real",
    # tensor.py
    "Tensor",
    # term.py
    "Axis", "Binding",
]
