"""spec_lang: the traced tensor DSL of shardproof (specs, SPMD plans, autodiff, models).

Public API, grouped by module (``docs/dsl.md`` is the reference; a test keeps the two in sync).
"""

from spec_lang.autodiff import backward, grad, lower, zeros_like
from spec_lang.collectives import (
    PRIMITIVES, REGIONS, all_gather, all_reduce, broadcast, collectives_table,
    copy_to_tp_region, gather_from_sp_region, gather_from_tp_region, reduce_from_tp_region,
    reduce_scatter, reduce_scatter_to_sp_region, region, scatter_to_tp_region,
)
from spec_lang.dims import Dim
from spec_lang.errors import PlanError, SpecError, SpecLangError
from spec_lang.iteration import Iteration, build_problem, trace_plan, trace_spec
from spec_lang.load import load
from spec_lang.mesh import Mesh
from spec_lang.ops import (
    add, axis_size, cast, causal_mask, chunk, chunks, concat, const, cross_entropy,
    cross_entropy_per_token, dim_size, div, einsum, embedding, erf, exp, gelu, layer_norm, log,
    log_softmax, logsumexp, matmul, max, maximum, mean, mul, neg, one_hot, pow, rank,
    rank_const, recip, rename, rms_norm, rope, rope_cos, rope_sin, rsqrt, sigmoid, silu,
    softmax, sqrt, stop_gradient, sub, sum, tanh, transpose, where,
)
from spec_lang.muon import Muon
from spec_lang.optim import SGD, Adam, AdamW, InitStep, ParamGroups, grad_or_none
from spec_lang.ownership import Ownership
from spec_lang.param_groups import megatron_param_groups, weight_decay_groups
from spec_lang.pipeline import Accumulation, Pipeline, stage
from spec_lang.placement import Partial, Replicate, Shard, lineage
from spec_lang.plan import Loss, Plan, microbatches
from spec_lang.problem import Goal, Problem
from spec_lang.schedules import gpipe, interleaved_one_f_one_b, one_f_one_b
from spec_lang.spec import Data, Params, Spec, index, mask, positive, real
from spec_lang.tensor import Tensor
from spec_lang.term import Axis, Binding

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
