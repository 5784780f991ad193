"""Round 34e, false-refusal probe of 402ba4c's layout check: ``examples/torch/llama_tp.py``
(TP 2 + SP + loss_parallel, a right plan) at batch 1 (llama3_8b_tp8's batch, R34e-2), the
model modules imported from ``examples/torch``.
Truth (tp_truth): max 3.4e-8 (AdamW's normalisation of float64 rounding on near-zero
gradients; llama_tp at batch 2 is 8.9e-16). Prove at 402ba4c: **UNKNOWN** (exit 2, 3
size-literal goals of 106, the _unsafe_view_5 / _6 / _8 layouts, 70 s): R34e-2, a false refusal."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import contextlib

import torch
import torch.nn.functional as F
from torch.distributed.tensor.parallel import loss_parallel

from llama_model import ModelArgs, Transformer
from llama_parallelize import parallelize_llama

MESH = {"tp": 2}
SIZES = {"batch": 1, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}


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
    return parallelize_llama(model, mesh)


def train_step(model, optimizer, batch, mesh):
    with loss_parallel() if mesh is not None else contextlib.nullcontext():
        pred = model(batch["tokens"])
        loss = F.cross_entropy(pred.flatten(0, 1).float(), batch["labels"].flatten(0, 1))
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
