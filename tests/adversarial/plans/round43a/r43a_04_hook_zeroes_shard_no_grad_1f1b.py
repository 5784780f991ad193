"""R43a: r43a_01 with the hook's write a plain in-place op under ``torch.no_grad()`` instead of
through ``.data`` (it bumps the stored parameter's version counter, which
``pp_leaves.StepLeaves._unwritten`` compares at every reuse of the leaf and at the reduction).
Truth (pp_truth): wrong, the same numbers as r43a_01. Verdict (7319f22): **exit 3** (41 s),
"a parameter of a pipeline stage wrapped by fully_shard is written in place inside
schedule.step" at the hook's line: sound (the version counter is the boundary R43a-1 slips
under).
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


def _zero(targets):
    with torch.no_grad():
        for t in targets:
            t.zero_()


class ClampedBlock(llama_model.TransformerBlock):
    """A block whose ``w2`` is zeroed once its backward is done."""

    def forward(self, x, cos, sin):
        targets = getattr(self, "zero_targets", [])
        if x.requires_grad:
            x.register_hook(lambda g: _zero(targets))
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
