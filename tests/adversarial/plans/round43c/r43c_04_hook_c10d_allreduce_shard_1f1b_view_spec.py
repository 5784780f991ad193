"""R43c: fix 1 (R43a-1's ``writes_refused``) bypassed by a ``c10d`` in-place collective.
``StepLeaves.writes_refused`` refuses operators whose schema marks a ``Tensor(a!)`` argument
over a guarded storage; ``c10d::allreduce_(Tensor[] tensors, ...)`` marks none (aliasing.py
says so), so ``dist.all_reduce`` writing into the stored shard passes it, and it bumps no
version counter nor changes a storage (``_unwritten`` passes too).

Each block's input hook (as r43a_01) replaces ``feed_forward.w2.weight`` by the mean of its
two row halves (idempotent, so once per micro-batch is as once). Single device: ``w.data.copy_``
of ``m`` expanded twice, ``m = w.view(2, h, -1).mean(0)`` (r43c_01 writes ``cat([m, m])`` of
``(w[:h] + w[h:]) / 2``: its update goal stuck in the rewriter). Parallel (pp 2 x dp 2,
``w2`` Shard(0) over dp, 16 rows a rank): ``dist.all_reduce(w.data.to_local(), AVG, dp)``
of the stored shard, the same
values. The stand-in's leaf (gathered at the first forward) keeps the original ``w2`` for every
micro-batch; real FSDP2 re-gathers the averaged shard for later forwards (metadata-inference
pass's hook, B0 before F1 in 1F1B).

Truth (pp_truth): wrong, the same numbers as r43c_01 (gradients 4.0e-3 off). Verdict (b557eab):
UNKNOWN (104 s), 105 of 107 proved, the same 2 ``w2`` update goals open ("SHARD vs ADD"): this
spec form does not help the rewriter either; r43c_05 removes the goals instead (R43c-2).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

import llama_model
from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


def _average_halves(targets, group):
    import torch.distributed as dist
    for t in targets:
        if group is not None:           # the stored shard, Shard(0) over dp: a c10d write
            dist.all_reduce(t.data.to_local(), op=dist.ReduceOp.AVG, group=group)
        else:
            h = t.shape[0] // 2
            m = t.data.view(2, h, -1).mean(0)
            t.data.copy_(m.expand(2, h, m.shape[1]).reshape(t.shape))


class ClampedBlock(llama_model.TransformerBlock):
    """A block whose ``w2`` rows are averaged over its halves once its backward is done."""

    def forward(self, x, cos, sin):
        targets = getattr(self, "zero_targets", [])
        group = getattr(self, "avg_group", None)
        if x.requires_grad:
            x.register_hook(lambda g: _average_halves(targets, group))
        return super().forward(x, cos, sin)


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    for blk in m.layers.values():
        blk.__class__ = ClampedBlock
    return m


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    for blk in model.layers.values():    # the parameters the optimizer holds
        blk.zero_targets = [blk.feed_forward.w2.weight]
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    stage = pipeline_llama(model, mesh)
    for block in stage.layers.values():
        block.avg_group = mesh["dp"].get_group()
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(stage, mesh=mesh["dp"])
    return stage


def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1), labels.flatten(0, 1))


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["tokens"]), batch["labels"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = Schedule1F1B(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["tokens"],) if stage.is_first else ()
        schedule.step(*args, target=batch["labels"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
