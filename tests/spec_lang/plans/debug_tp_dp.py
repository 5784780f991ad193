"""Debug Llama (2 layers) on Mesh(dp=2, tp=2) with 2 micro-batches: Megatron TP + DP.

Attention shards KV heads and the MLP shards F over tp (column-parallel wq/wk/wv, w1/w3; row-
parallel wo, w2); the batch is sharded over dp, then over 2 micro-batches. The loss is the
global token mean: each rank backprops sum(mask * ce) / N with N the token count all-reduced
over dp and mb; gradients are accumulated over mb and summed over dp.
"""

from spec_lang import (
    AdamW, Axis, Loss, Mesh, Plan, Replicate, Shard, all_reduce, copy_to_tp_region,
    microbatches, reduce_from_tp_region,
)
from spec_lang import ops
from spec_lang.models import DEBUG, ParallelContext, llama

DP, TP, MB = Axis.DP, Axis.TP, Axis.MB
model = llama(DEBUG)
d = model.dims
spec = model.spec(AdamW())


class MegatronTP(ParallelContext):
    def enter_tp(self, x, d):
        return copy_to_tp_region(x, TP)

    def exit_tp(self, x, d):
        return reduce_from_tp_region(x, TP)

    def loss(self, logits, labels, mask, d):
        ce = ops.cross_entropy_per_token(logits, labels, d.V)
        n_tokens = all_reduce(all_reduce(ops.sum(mask), DP), MB)
        return ops.sum(mask * ce) / n_tokens


layer_plan = {"attn.wq": {TP: Shard(d.KVH)}, "attn.wk": {TP: Shard(d.KVH)},
              "attn.wv": {TP: Shard(d.KVH)}, "attn.wo": {TP: Shard(d.KVH)},
              "mlp.w1": {TP: Shard(d.F)}, "mlp.w3": {TP: Shard(d.F)}, "mlp.w2": {TP: Shard(d.F)}}
placements = {f"layers.{i}.{k}": v for i in range(DEBUG.n_layers) for k, v in layer_plan.items()}
placements.update({"tokens": {DP: Shard(d.B)}, "labels": {DP: Shard(d.B)},
                   "mask": {DP: Shard(d.B)}, "norm": {DP: Replicate()}})


def forward(p, data):
    seed = model.forward(p, data, MegatronTP())
    return Loss(backward=seed, report=all_reduce(seed, DP))


plan = Plan(mesh=Mesh(dp=2, tp=2), placements=placements, forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, DP, "sum"),
            microbatches=microbatches(2, d.B))
