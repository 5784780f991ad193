"""r42_02's mutant: each pipeline stage clips its gradients with its own stage's norm (the
all-reduce of the squared norm over ``pp`` left out): wrong (the spec clips the whole model
with one norm).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.distributed as dist
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
    return pipeline_llama(model, mesh)


def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1), labels.flatten(0, 1))


MAX_NORM = 0.05     # below the gradient's norm: the clipping scales every gradient


def clip_grad_norm_pp(parameters, max_norm, pp_mesh):
    """torchtitan's ``clip_grad_norm_`` under PP x FSDP: the norm of the stage's (sharded
    DTensor) gradients, its square summed over the pipeline stages, then every gradient clipped
    with the global norm."""
    from torch.distributed.tensor import DTensor
    parameters = list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = torch.nn.utils.get_total_norm(grads, 2.0, False, None)
    if isinstance(total_norm, DTensor):
        total_norm = total_norm.full_tensor()
    total_norm = total_norm ** 2.0
    # the bug: no all-reduce of the squared norm over pp (each stage clips with its own norm)
    total_norm = total_norm ** 0.5
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total_norm, None)
    return total_norm


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    if mesh is None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
    else:
        clip_grad_norm_pp(model.parameters(), MAX_NORM, mesh["pp"])
    optimizer.step()
    optimizer.zero_grad()
    return loss
