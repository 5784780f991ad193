"""R43c-2 made a false accept: r43c_01 (a block's input hook writes its stored ``w2`` shard
with ``dist.all_reduce``, unrefused by ``writes_refused``: c10d schemas mark no ``Tensor(a!)``),
and ``train_step`` restores every ``w2`` from a copy taken before the step once the optimizer
has run (both paths), so the two ``w2`` update goals r43c_01 left open (rewriter stuck on the
write) become trivial. What is left is what the write does inside the step: the stand-in's
micro-batches read the leaf gathered before it (the spec's gradients: r43c_01 proved every
gradient goal); real FSDP2 re-gathers the written shard for later micro-batches (the
metadata-inference pass's hook first, B0's before F1 in 1F1B) and computes other gradients.

Truth (pp_truth, 16 s): wrong, ``layers.1.feed_forward.w1.weight``'s gradient 4.0e-3 off,
``output.weight``'s update 6.0e-4 off (``w2`` exact: restored). Verdict (b557eab):
**EQUIVALENT**, 107 goals (102 s): R43c-2.
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
            m = (t.data[:h] + t.data[h:]) / 2
            t.data.copy_(torch.cat([m, m]))


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
    targets = [t for blk in model.layers.values() for t in getattr(blk, "zero_targets", [])]
    saved = [t.detach().clone() for t in targets]
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
    with torch.no_grad():          # w2 restored from before the step (both paths)
        for t, c in zip(targets, saved):
            t.copy_(c)
    return loss
