"""Llama (torchtitan-shaped) split into 2 pipeline stages with ``torch.distributed.pipelining``
(``PipelineStage``, ``ScheduleGPipe``, 2 micro-batches) x FSDP2 on dp 2: ``fully_shard`` on
every block of the stage and on the stage module, then the stage built on it (torchtitan's
PP x FSDP configuration; 4 ranks, ``MESH`` outer to inner: rank = 2 * pp + dp). No
hand-written reduction: torch's schedule accumulates the micro-batches' gradients unreduced and
runs FSDP2's reduce-scatter once, after the last backward (``perform_reduce_grad``).

Runs on a real process group (``tests/torch_frontend/pp_truth.py`` runs it with gloo on 4
processes and matches the single-device step to 1e-9 in float64: grad 5.6e-17, update
2.8e-16). ``prove --torch``: EQUIVALENT, 107 goals, 141-187 s (``--no-check``, shared 2-core
machine; ``docs/torch.md``, "Pipelining": why each micro-batch's reduction is the same step).

    prove --torch examples/torch/llama_pp_fsdp.py
"""

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
