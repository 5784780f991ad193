"""R41e (R41e-1's write half): ``examples/torch/llama_pp_fsdp.py`` with ``Schedule1F1B`` whose
output head sets its own weight's ``.grad = None`` in its forward (``if self.weight.is_leaf``).

Idea: single-device the forward precedes the backward: a no-op. For real (1F1B: the last stage
runs F0 B0 F1 B1) micro-batch 1's forward meets FSDP2's unsharded leaf holding micro-batch 0's
local gradient and drops it: ``output.weight`` gets micro-batch 1's gradient only. The
stand-in's forward sees a gathered non-leaf view: nothing is dropped, the spec's numbers.

Truth (pp_truth, gloo, float64): ``output.weight``'s gradient wrong, 0.041 (the other 20
exact), update 6.0e-4 (24 s). Verdict (4b1ee65): **EQUIVALENT**, 107 goals (164 s: trace
160 s): R41e-1.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


class Head(nn.Linear):
    """The output head; its forward drops any gradient its weight holds (``.grad = None``: a
    no-op in the single-device step, whose one forward comes before any backward)."""

    def forward(self, x):
        if self.weight.is_leaf:
            self.weight.grad = None
        return F.linear(x, self.weight)


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    m.output = Head(m.output.in_features, m.output.out_features, bias=False)
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
