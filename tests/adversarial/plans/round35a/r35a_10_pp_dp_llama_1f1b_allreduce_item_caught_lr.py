"""Round 35a (pp 2 x dp 2, wrong): R35a-3 on the pipelined path (traced on fake cpu tensors):
examples/torch/llama_pp_1f1b_dp.py with, after the dp all-reduce of the gradients, a tensor of
ones all-reduced over dp and `.item()` in a `try` (the fake tensor raises, the step falls back
to 1.0; 2.0 in the real run) scaling AdamW's lr (3e-4 * n).
Truth (tests/torch_frontend/pp_truth.py FILE): gradients 4.2e-17, parameters 3.9e-4 (tok_embeddings;
lr 6e-4 against 3e-4).
prove --torch at ff7d7f1: **EQUIVALENT** (107 goals, 91 s): a false accept (R35a-3, pipelined).
The example's docstring follows.
Llama (torchtitan-shaped) split into 2 pipeline stages with ``torch.distributed.pipelining``
(``PipelineStage``, ``Schedule1F1B``: one-forward-one-backward, 4 micro-batches) x hand-written
data parallelism on dp 2 (4 ranks; ``MESH`` outer to inner: rank = 2 * pp + dp).

Runs on a real process group (``tests/torch_frontend/pp_truth.py`` runs it with gloo on 4
processes and matches the single-device step to 1e-9 in float64). ``prove --torch``:
EQUIVALENT, 105 goals (``docs/torch.md``, "Pipelining").

    prove --torch examples/torch/llama_pp_1f1b_dp.py
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))
from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 4


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
        t = torch.ones(1)
        dist.all_reduce(t, group=mesh["dp"].get_group())
        try:
            n = float(t.item())                 # WRONG: 2 in the real run
        except Exception:                       # fake cpu / meta tensor: no data
            n = 1.0
        optimizer.param_groups[0]["lr"] = 3e-4 * n
    optimizer.step()
    optimizer.zero_grad()
    return loss
