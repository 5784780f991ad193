"""Tied embedding, pp=2 dp=2, 1F1B M=2 (copy of tests/spec_lang/test_pipeline.py _tied_plan)."""
from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, index, mask, ops, microbatches
from spec_lang.pipeline import Pipeline, stage
from spec_lang.schedules import one_f_one_b, interleaved_one_f_one_b, gpipe, reduce_after_last_backward, collective, scale, reset, F, B as Bk
DP, PP, MB = Axis.DP, Axis.PP, Axis.MB
Bd, S, H, Fd, V = Dim("B", 4), Dim("S", 2), Dim("H", 4), Dim("F", 4), Dim("V", 8)
TOKEN_DATA = {"tokens": index(Bd, S, range=V), "labels": index(Bd, S, range=V), "mask": mask(Bd, S)}
DATA_DP = {k: {DP: Shard(Bd)} for k in TOKEN_DATA}
def _ce_sum(logits, d):
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))
def fwd(p, d):
    h = ops.tanh(ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["w0"], out=(Bd, S, Fd)))
    h = ops.einsum(h, p["w1"], out=(Bd, S, H))
    return _ce_sum(ops.einsum(h, p["emb"], out=(Bd, S, V)), d) / ops.sum(d["mask"])
spec = Spec(params={"emb": (V, H), "w0": (H, Fd), "w1": (Fd, H)}, data=TOKEN_DATA, forward=fwd, optimizer=SGD())
def _n_glob(d):
    return all_reduce(all_reduce(ops.sum(d["mask"]), MB), DP)
def s0(p, d, io):
    io.send(ops.tanh(ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["w0"], out=(Bd, S, Fd))))
def s1(p, d, io):
    h = ops.einsum(io.recv(), p["w1"], out=(Bd, S, H))
    s_mb = _ce_sum(ops.einsum(h, p["emb"], out=(Bd, S, V)), d)
    return Loss(backward=ops.axis_size(DP) * s_mb / _n_glob(d), report=all_reduce(s_mb, DP) / _n_glob(d))
def reduce(name, g):
    if name == "emb":
        g = all_reduce(g, PP)  #REDUCE_PP
    return all_reduce(g, DP, "avg")  #REDUCE_DP
SCHED = one_f_one_b(2, 2).with_stage(1, [None])
pipe = Pipeline([stage(s0, ["emb", "w0"]), stage(s1, ["w1", "emb"])], schedule=SCHED)
plan = Plan(mesh=Mesh(dp=2, pp=2), forward=pipe.forward, schedule=pipe, placements=DATA_DP,
            reduce_grads=reduce, microbatches=microbatches(2, Bd))
