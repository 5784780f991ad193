"""B19 fixed: Megatron-LM #6660 / PR #6773, Megatron-FSDP + gradient accumulation with a
1-rank gradient group.

Spec: g = sum_m g_m over the M micro-batches of the window (each backprops S_m / N), times the
data-parallel averaging factor, which is 1 for a 1-rank group.
Plan (dp=1: the gradient group has one rank; M=2): the buffer only accumulates,
buf_k = buf_{k-1} + g_k, and one reduction (an average over the 1-rank group, the identity)
runs after the last micro-batch.
Expected: EQUIVALENT, with a certificate.
Buggy (B19_buggy.py): the in-place 1-rank reduction re-adds the carried buffer after every
micro-batch: buf_M = sum_k 2^(M-k) g_k.
"""

from spec_lang import SGD, Axis, Dim, Mesh, Plan, Spec, all_reduce, index, mask, microbatches
from spec_lang import ops
from spec_lang.pipeline import Accumulation
from spec_lang.schedules import B as backward, F as forward_mb, collective

DP, MB = Axis.DP, Axis.MB
Bd, S, H, V = Dim("B", 2), Dim("S", 4), Dim("H", 4), Dim("V", 8)


def masked_ce_sum(p, d):
    """Embedding, one linear head, masked cross-entropy sum over the tokens here."""
    logits = ops.einsum(ops.embedding(d["tokens"], p["emb"], V), p["head"], out=(Bd, S, V))
    return ops.sum(d["mask"] * ops.cross_entropy_per_token(logits, d["labels"], V))


spec = Spec(params={"emb": (V, H), "head": (H, V)},
            data={"tokens": index(Bd, S, range=V), "labels": index(Bd, S, range=V),
                  "mask": mask(Bd, S)},
            forward=lambda p, d: masked_ce_sum(p, d) / ops.sum(d["mask"]),
            optimizer=SGD())


def forward(p, d):
    n = all_reduce(all_reduce(ops.sum(d["mask"]), MB), DP)       # N over the window
    return ops.axis_size(DP) * masked_ce_sum(p, d) / n            # x dp: the avg below


events = [forward_mb(0), backward(0),
          forward_mb(1), backward(1),
          collective("tp", "avg")]
plan = Plan(mesh=Mesh(dp=1), forward=forward, schedule=Accumulation(events, microbatches=2),
            microbatches=microbatches(2, Bd))
