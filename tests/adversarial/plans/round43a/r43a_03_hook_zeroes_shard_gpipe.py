"""R43a: r43a_01 under GPipe (F0 F1 B0 B1 on both stages: no forward after a backward in
the step), so that only torch 2.13's metadata-inference pass (a forward and, on the last
stage, a backward through the loss at the first ``schedule.step``) runs the zeroing hook
before the micro-batches' forwards. Single device and stand-in as r43a_01 (the forward with the
original ``w2``); real FSDP2: the inference backward's hook zeroes the last stage's shard and
both micro-batch forwards all-gather ``w2 = 0``.

Truth (pp_truth): wrong, the same numbers as r43a_01 (``layers.1.feed_forward.w3.weight``'s
gradient 6.1e-3 off, ``output.weight``'s 5.3e-3, updates 6.0e-4): the whole difference comes
from the inference pass. Verdict (7319f22): **EQUIVALENT**, 107 goals (178 s): R43a-1.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

import llama_model
from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


class ClampedBlock(llama_model.TransformerBlock):
    """A block whose ``w2`` is zeroed once its backward is done."""

    def forward(self, x, cos, sin):
        targets = getattr(self, "zero_targets", [])
        if x.requires_grad:
            x.register_hook(lambda g: [t.data.zero_() for t in targets] and None)
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
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["tokens"],) if stage.is_first else ()
        schedule.step(*args, target=batch["labels"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
