"""What the Llama train files share: the sizes, the model builder, the batch, the optimizer and
the training step (torchtitan's ``train_step``: forward and loss under ``loss_parallel`` when
the output is vocab-sharded, backward, clipping at 1.0, AdamW).

The hidden width is 32 (4 kv heads x 2 x head_dim 4): at 64 the refuter's standard-normal draws
overflow to NaN on every goal of a two-layer Llama, so a divergence found at reduced sizes could
not be confirmed at the real sizes (the buggy files would be UNKNOWN, not refuted)."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.distributed.tensor.parallel import loss_parallel

from llama_model import ModelArgs, Transformer

SIZES = {"batch": 4, "seq": 16, "n_kv_heads": 4, "n_rep": 2, "head_dim": 4, "ffn": 64,
         "vocab": 64}


def build_model(s, n_layers=2):
    heads = s["n_kv_heads"] * s["n_rep"]
    return Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=n_layers, n_heads=heads,
                                 n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                                 ffn_hidden=s["ffn"], max_seq_len=s["seq"]))


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)


def train_step(model, optimizer, batch, mesh, *, parallel_loss=True, max_norm=1.0):
    ctx = loss_parallel() if mesh is not None and parallel_loss else contextlib.nullcontext()
    with ctx:
        pred = model(batch["tokens"])
        loss = F.cross_entropy(pred.flatten(0, 1).float(), batch["labels"].flatten(0, 1))
        loss.backward()
    if max_norm is not None:      # clip_grad_norm_ needs every gradient a DTensor or none
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    optimizer.zero_grad()
    return loss
