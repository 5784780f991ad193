"""Debug GPT-2 under Megatron-LM TP2 x DP2 x 2 micro-batches, written by hand from the docs.

The plan of issue 12: the user's own Megatron hooks (``f`` / ``g`` regions, the vocab-parallel
embedding and cross-entropy) around the library's GPT-2 blocks, with the target logit written
as a sum of a product, ``ops.sum(z * one_hot(y, V, shards=("tp",)), V)``, not an einsum. It
proves by rewriting alone (the ``einsum-pointwise`` rule gives both spellings one normal form).
Scale factors: the seed is ``|dp| * S_mb / N`` (Megatron's ``dp*K/N`` pre-factor times its
``1/K``), the K micro-batch gradients are summed, DDP averages over dp.
"""

from spec_lang import AdamW, Loss, Mesh, Plan, Replicate, Shard, all_reduce, microbatches, ops
from spec_lang import region
from spec_lang.models import GPT2_DEBUG, gpt2
from spec_lang.models.llama import ParallelContext

model = gpt2(GPT2_DEBUG)
d = model.dims
TP, DP = "tp", "dp"
F_ = ("identity", "all_reduce")     # Megatron's f: copy_to_tensor_model_parallel_region
G_ = ("all_reduce", "identity")     # Megatron's g: reduce_from_tensor_model_parallel_region


class Megatron(ParallelContext):
    """The per-rank hooks of the GPT-2 blocks (spec_lang.models.gpt2)."""

    def enter_tp(self, x, d):
        return region(x, "copy_to_tp", *F_, TP)

    def exit_tp(self, x, d):
        return region(x, "reduce_from_tp", *G_, TP)

    def embed(self, tokens, table, d):            # masked lookup in the rank's V block, then g
        return region(ops.embedding(tokens, table, d.V), "reduce_from_tp", *G_, TP)

    def head_input(self, x, d):                   # the tied head is column-parallel over V
        return self.enter_tp(x, d)

    def loss(self, z, labels, mask, d):           # z: (B[dp,mb], S, V[tp])
        m = ops.stop_gradient(all_reduce(ops.max(z, d.V), TP, "max"))
        sum_exp = region(ops.sum(ops.exp(z - m), d.V), "reduce_from_tp", *G_, TP)
        target = ops.sum(z * ops.one_hot(labels, d.V, shards=(TP,)), d.V)
        target = region(target, "reduce_from_tp", *G_, TP)
        ce = m + ops.log(sum_exp) - target        # (B, S), replicated over tp
        n = all_reduce(all_reduce(ops.sum(mask), "mb"), DP)      # the global token count N
        self.report = all_reduce(ops.sum(mask * ce), DP) / n
        return ops.axis_size(DP) * ops.sum(mask * ce) / n


def forward(p, data):
    ctx = Megatron()
    seed = model.forward(p, data, ctx)
    return Loss(backward=seed, report=ctx.report)


col, row, rep = {TP: Shard(d.NH)}, {TP: Shard(d.NH)}, {TP: Replicate()}
layer = {"ln_1.weight": rep, "ln_1.bias": rep, "ln_2.weight": rep, "ln_2.bias": rep,
         "attn.q.weight": col, "attn.q.bias": col, "attn.k.weight": col, "attn.k.bias": col, "attn.v.weight": col,
         "attn.v.bias": col, "attn.proj.weight": row, "attn.proj.bias": rep,
         "mlp.fc.weight": {TP: Shard(d.F)}, "mlp.fc.bias": {TP: Shard(d.F)},
         "mlp.proj.weight": {TP: Shard(d.F)}, "mlp.proj.bias": rep}
placements = {"wte": {TP: Shard(d.V)}, "wpe": rep, "ln_f.weight": rep, "ln_f.bias": rep,
              "tokens": {DP: Shard(d.B)}, "labels": {DP: Shard(d.B)}, "mask": {DP: Shard(d.B)}}
for i in range(GPT2_DEBUG.n_layers):
    placements.update({f"layers.{i}.{k}": v for k, v in layer.items()})

spec = model.spec(AdamW())
plan = Plan(mesh=Mesh(dp=2, tp=2), placements=placements, forward=forward,
            reduce_grads=lambda name, g: all_reduce(g, DP, "avg"),
            microbatches=microbatches(2, d.B))
