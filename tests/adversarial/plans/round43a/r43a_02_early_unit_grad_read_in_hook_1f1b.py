"""R43a: design 43's open gap (3), which object an earlier unit has registered while a later
unit's backward runs. Four blocks, two per stage, each its own ``fully_shard`` unit (default
``reshard_after_forward=True``); block 3 (the last stage's second) registers in its forward
a hook on its output that halves the incoming gradient when the previous block's
``feed_forward.w2.weight`` (read through the module; a plain list holds the previous block)
already has a ``.grad``.

Single device: the previous block's backward has not run yet when the hook fires: ``.grad`` is
None, nothing is halved. Real FSDP2 on the last stage (1F1B: F0 B0 F1 B1): at B1 the previous
block was resharded by its F1 post-forward (the sharded parameter registered, ``.grad`` None):
nothing halved, the spec's numbers. Stand-in: ``backward_maybe_with_nosync`` registers every
unit's leaf from the start of the backward, and block 2's leaf holds micro-batch 0's gradient
at B1: block 3's incoming gradient halved. A right file the stand-in may compute wrong.

Truth (pp_truth): right (gradients 4.2e-17, updates 1.7e-15; a first form with the hook on
every block was wrong: stage 0 runs F0 F1 B0 B1, its block 0 stays unsharded with its
gradient from B0). Verdict (7319f22): **NOT EQUIVALENT** (214 s, 122 goals refuted: the
last stage's gradients): R43a-2, a wrong NOT EQUIVALENT.
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


class WatchBlock(llama_model.TransformerBlock):
    """A block whose incoming gradient is halved once the previous block's ``w2`` has one."""

    def forward(self, x, cos, sin):
        out = super().forward(x, cos, sin)
        prev = self.prev[0] if self.prev else None
        if prev is not None:
            out.register_hook(lambda g: g * 0.5 if prev.feed_forward.w2.weight.grad is not None
                              else None)
        return out


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=4, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    prev = None
    for blk in m.layers.values():
        blk.__class__ = WatchBlock
        blk.prev = [prev] if blk.layer_id == 3 else []   # the last stage's second block
        prev = blk
    return m


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    stage = pipeline_llama(model, mesh)
    for block in stage.layers.values():
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
