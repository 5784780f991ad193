"""Debug Llama on Mesh(tp=2) with Megatron tensor + sequence parallelism.

The residual stream is sharded along S over tp. Entering a TP region all-gathers S
(``gather_from_sp``: backward reduce-scatter); leaving it reduce-scatters S
(``reduce_scatter_to_sp``: backward all-gather). The embedding output is split along S; before
the (replicated) head the stream is all-gathered with a *split* backward (``gather_from_tp``),
because every rank computes the full logits. Norm weights see only the rank's tokens, so their
gradients are summed over tp (Megatron's sequence-parallel gradient all-reduce).
"""

from spec_lang import (
    SGD, Axis, Mesh, Plan, Shard, all_reduce, gather_from_sp_region, gather_from_tp_region,
    reduce_scatter_to_sp_region, scatter_to_tp_region,
)
from spec_lang import ops
from spec_lang.models import DEBUG, ParallelContext, llama

TP = Axis.TP
model = llama(DEBUG)
d = model.dims
spec = model.spec(SGD(lr=0.01))


class MegatronSP(ParallelContext):
    def embed(self, tokens, table, d):
        return scatter_to_tp_region(ops.embedding(tokens, table, d.V), d.S, TP)

    def enter_tp(self, x, d):
        return gather_from_sp_region(x, d.S, TP)

    def exit_tp(self, x, d):
        return reduce_scatter_to_sp_region(x, d.S, TP)

    def head_input(self, x, d):
        return gather_from_tp_region(x, d.S, TP)


layer_plan = {"attn.wq": {TP: Shard(d.KVH)}, "attn.wk": {TP: Shard(d.KVH)},
              "attn.wv": {TP: Shard(d.KVH)}, "attn.wo": {TP: Shard(d.KVH)},
              "mlp.w1": {TP: Shard(d.F)}, "mlp.w3": {TP: Shard(d.F)}, "mlp.w2": {TP: Shard(d.F)}}
placements = {f"layers.{i}.{k}": v for i in range(DEBUG.n_layers) for k, v in layer_plan.items()}
SEQUENCE_PARALLEL = ("attention_norm", "ffn_norm", "norm")


def reduce_grads(name, g):
    if name.rsplit(".", 1)[-1] in SEQUENCE_PARALLEL:
        return all_reduce(g, TP, "sum")
    return g


plan = Plan(mesh=Mesh(tp=2), placements=placements,
            forward=lambda p, data: model.forward(p, data, MegatronSP()),
            reduce_grads=reduce_grads)
