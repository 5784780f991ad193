"""R43c: fix 3 (R43b's ``_follows``) re-syncs the root unit's leaf ``requires_grad`` at every
forward; FSDP2 copies it only at ``to_unsharded`` (an all-gather), and the root unit (the stage
module, ``reshard_after_forward`` None -> False) may stay unsharded between micro-batches.
``examples/torch/llama_pp_fsdp.py`` (GPipe, pp 2 x dp 2): the loss function freezes
``norm.weight`` (the stored parameter) once a micro-batch's loss is computed (not at its first
call, which on the last stage is torch's metadata-inference pass). The spec freezes it after
its loss too, before ``backward``: ``AccumulateGrad`` skips a leaf that no longer requires grad,
so the spec's norm gets no gradient.

Stand-in: F1's ``leaf_for`` copies False into the leaf; at the backwards the leaf does not
require grad: no gradient, the spec's. FSDP2: if the root is not gathered again at F1, its
unsharded parameter still requires grad at B0 / B1 and accumulates a gradient AdamW applies.

Truth (pp_truth copy recording a missing gradient, 20 s): wrong, ``norm.weight`` has a
gradient on the real last stage (none in the spec), its update 3.3e-4 off; every other
gradient / update within 3e-16. Verdict (b557eab): **EQUIVALENT**, 106 goals (95 s): R43c-1.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
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
        model.norm.weight.requires_grad_(False)     # frozen once the loss is computed
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        norm = model.norm.weight if model.norm is not None else None   # the stored one

        calls = [0]

        def freezing_loss(pred, labels):
            out = loss_fn(pred, labels)
            calls[0] += 1
            if calls[0] > 1:          # not at torch's metadata-inference call
                norm.requires_grad_(False)
            return out

        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=freezing_loss)
        losses = []
        args = (batch["tokens"],) if stage.is_first else ()
        schedule.step(*args, target=batch["labels"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
