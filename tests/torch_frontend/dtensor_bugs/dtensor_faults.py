"""Faulty DTensor sharding rules, reproduced from real PyTorch bug reports, for the tests of
``prove --torch`` only (issue 11 item 6). A train file that imports this module and calls an
``install_*`` function replaces one of DTensor's sharding strategies in the process that runs
it, the capture child of ``prove --torch`` (which runs the train file like any user code): the
local program then moves data the way the faulty rule says, and the verifier, which reads the
local program and never DTensor's placements, must refute it.

* :func:`install_view_179502`: pytorch #179502, "sharded view incorrectly passes when
  redistribution is needed": ``x: [12, 8] Shard(1)``, ``x.view(16, 6)`` returns ``Shard(0)`` and
  views the local shard, instead of redistributing.
* :func:`install_norm_159856`: pytorch PR #159856, "fix incorrect norm calculation for Partial
  DTensors": ``linalg_vector_norm`` (and ``_foreach_norm``) of a ``Partial(sum)`` DTensor was
  treated as reduction-linear: the norm of each rank's summand, then summed (a sum of norms,
  not the norm of the sum).

Each function wraps torch 2.13.0's own strategy and changes only the cases the report
describes; it clears DTensor's sharding-propagation caches (Python and C++) so that the faulty rule is used.
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._dtensor_spec import DTensorSpec
from torch.distributed.tensor._op_schema import OpSpec, OpStrategy, TupleStrategy
from torch.distributed.tensor.placement_types import Partial, Shard

aten = torch.ops.aten
PROP = DTensor._op_dispatcher.sharding_propagator  # noqa: SLF001 -- the rule table itself


def _install(op, faulty) -> None:
    right = PROP.op_strategy_funcs[op]
    PROP.op_strategy_funcs[op] = faulty(right)
    PROP.propagate_op_sharding.cache_clear()                 # the Python cache
    torch._C._clear_DTensor_sharding_propagator_cache()      # and the C++ fast path's


def install_view_179502() -> None:
    """``aten.view`` of a ``Shard(1)`` input whose blocks are not blocks of the viewed tensor:
    where torch's rule redistributes the input (the report's ``[12, 8] -> [16, 6]``) or records
    the interleaving as ``_StridedShard`` (flattening ``[batch, seq, hidden]`` sharded on
    ``seq``), the faulty rule keeps the input as it is, views the local shard and declares the
    output ``Shard(0)`` on that mesh dim (pytorch #179502)."""

    def faulty(right):
        def view_strategy(op_schema):
            out = right(op_schema)
            src = op_schema.args_schema[0]
            fixed = []
            for spec, s in zip(out.strategies, src.strategies):
                have = s.output_spec
                want = spec.input_specs[0]
                moved = want.placements != have.placements
                strided = any(type(p).__name__ == "_StridedShard"
                              for p in spec.output_spec.placements)
                if (moved or strided) and Shard(1) in have.placements:
                    pl = tuple(Shard(0) if p == Shard(1) else q
                               for p, q in zip(have.placements, spec.output_spec.placements))
                    spec = OpSpec(output_specs=DTensorSpec(have.mesh, pl),
                                  input_specs=(have,),
                                  redistribute_cost=[[0.0] * len(src.strategies)])
                fixed.append(spec)
            return OpStrategy(fixed)
        return view_strategy

    _install(aten.view.default, faulty)


def install_norm_159856() -> None:
    """``aten.linalg_vector_norm`` and ``aten._foreach_norm``: where torch's rule all-reduces a
    ``Partial(sum)`` input before the norm, the faulty rule keeps the input as it is and keeps
    the output ``Partial(sum)``: each rank's norm of its summand, summed on the next reduction
    (pytorch PR #159856, "the norm operation is always reduction linear")."""

    def fault(strategy, src):
        fixed = []
        for spec, s in zip(strategy.strategies, src.strategies):
            have = s.output_spec
            if any(isinstance(p, Partial) and p.reduce_op == "sum" for p in have.placements) \
                    and spec.input_specs[0].placements != have.placements:
                pl = tuple(p if isinstance(p, Partial) else q
                           for p, q in zip(have.placements, spec.output_spec.placements))
                spec = OpSpec(output_specs=DTensorSpec(have.mesh, pl), input_specs=(have,),
                              redistribute_cost=[[0.0] * len(src.strategies)])
            fixed.append(spec)
        return OpStrategy(fixed)

    def faulty_norm(right):
        def norm_strategy(op_schema):
            return fault(right(op_schema), op_schema.args_schema[0])
        return norm_strategy

    def faulty_foreach(right):
        def foreach_norm_strategy(op_schema):
            out = right(op_schema)
            return TupleStrategy([fault(c, s) for c, s in
                                  zip(out.children, op_schema.args_schema[0].children)])
        return foreach_norm_strategy

    _install(aten.linalg_vector_norm.default, faulty_norm)
    _install(aten._foreach_norm.Scalar, faulty_foreach)
