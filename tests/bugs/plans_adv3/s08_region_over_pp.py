"""B18 fixed: torchrec PR #4758, pipeline parallelism (FIFO 1F1B) + DDP on each stage.

Spec: L = S / N, the masked token mean over the global batch; g = grad L. Per replica r:
g = AR_avg[dp](sum_m g_{r,m}).
Plan (pp=2, dp=2, M=2, 1F1B): every forward runs under DDP's ``no_sync`` and each stage runs one
explicit gradient reduction after its last backward (stage 0: F0 F1 B0 B1 AR; stage 1:
F0 B0 F1 B1 AR), so every reduction reads both micro-batches' contributions.
Expected: EQUIVALENT, with a certificate.
Buggy (B18_buggy.py): the last forward arms the reduction, which fires in the next backward
(B0 on stage 0), leaving AR_avg[dp](g_{r,0}) + g_{r,1}.
"""

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, ops
from spec_lang import microbatches
from spec_lang.collectives import region
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import reduce_after_last_backward, one_f_one_b

DP, PP, MB = Axis.DP, Axis.PP, Axis.MB
B, S, H, F, V = Dim("B", 4), Dim("S", 2), Dim("H", 4), Dim("F", 4), Dim("V", 8)


def stage0_layers(p, tokens):
    """Embedding lookup and one linear layer: (B, S) -> (B, S, F)."""
    return ops.tanh(ops.einsum(ops.embedding(tokens, p["emb"], V), p["w0"], out=(B, S, F)))


def stage1_loss_sum(p, h, d):
    """Output head and masked cross-entropy sum S over this micro-batch's tokens."""
    logits = ops.einsum(h, p["head"], out=(B, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "w0": (H, F), "head": (F, V)},
            data={"tokens": index(B, S, range=V), "labels": index(B, S, range=V),
                  "mask": mask(B, S)},
            forward=lambda p, d: stage1_loss_sum(p, stage0_layers(p, d["tokens"]), d)
            / ops.sum(d["mask"]),
            optimizer=SGD())


def first(p, d, io):
    io.send(stage0_layers(p, d["tokens"]))


def last(p, d, io):
    n_glob = all_reduce(all_reduce(ops.sum(d["mask"]), MB), DP)   # N, before the loop
    x = region(io.recv(), 'sp', 'split', 'all_gather', axis=PP, dim=F)   # only stage 1 issues these
    x = region(x, 'ag', 'all_gather', 'split', axis=PP, dim=F)
    s_mb = stage1_loss_sum(p, x, d)
    return Loss(backward=ops.axis_size(DP) * s_mb / n_glob,        # x dp: DDP averages
                report=all_reduce(s_mb, DP) / n_glob)


pipe = Pipeline([stage(first, ["emb", "w0"]), stage(last, ["head"])],
                schedule=reduce_after_last_backward(one_f_one_b(pp=2, microbatches=2), DP))
plan = Plan(mesh=Mesh(dp=2, pp=2), forward=pipe.forward, schedule=pipe,
            placements={k: {DP: Shard(B)} for k in ("tokens", "labels", "mask")},
            microbatches=microbatches(2, B))
