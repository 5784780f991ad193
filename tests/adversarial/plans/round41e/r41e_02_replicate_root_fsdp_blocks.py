"""R41e: ``examples/torch/llama_pp_fsdp.py`` with ``fully_shard`` on the blocks and torch
2.13's FSDP-based ``replicate`` on the stage module (the root).

Idea: torch's ``perform_reduce_grad`` runs ``post_backward`` of every state in the root's
``replicate.state(...)._state_ctx.all_states``: are the ``fully_shard`` blocks' states in the
replicate root's context? If not, the blocks' accumulated gradients are never reduced for real,
while the stand-in reduces every unit in every backward.

Truth (gloo, 4 processes): wrong. pp_truth itself fails (``KeyError`` in its optimizer
pre-hook: 9 of each rank's module parameters are no longer the optimizer's, the blocks' left
unsharded); a /tmp copy naming the optimizer's parameters shows every block parameter (9 per
stage, on all 4 ranks) with **no gradient** at ``optimizer.step()``: the blocks' states are
not in the replicate root's context, their gradients never reduced, AdamW skips them.
Verdict (4b1ee65): exit 3 (56 s): "capturing the training step failed: aten._foreach_mul_
.Scalar got mixed torch.Tensor and DTensor" (line 74, ``optimizer.step()``: the stand-in's
FSDP-based ``replicate`` leaves its parameters plain tensors, the blocks' are DTensors; for
real both are DTensors and the step runs). Sound (refused), for a reason of its own.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    return Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                                 n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                                 ffn_hidden=s["ffn"], max_seq_len=s["seq"]))


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate_with_fsdp import replicate
    from torch.distributed.fsdp import fully_shard
    stage = pipeline_llama(model, mesh)
    for block in stage.layers.values():
        fully_shard(block, mesh=mesh["dp"])
    replicate(stage, mesh=mesh["dp"])
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
