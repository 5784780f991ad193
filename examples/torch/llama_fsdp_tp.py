"""Llama (torchtitan-shaped) with FSDP2 on dp and tensor + sequence parallelism with
loss_parallel on tp (2-D: dp 2 x tp 2), and torchtitan's default mixed precision (bf16
parameters in the forward and backward, float32 reduction: ``MixedPrecisionPolicy``).

    prove --torch examples/torch/llama_fsdp_tp.py
"""

import contextlib

import torch
import torch.nn.functional as F
from torch.distributed.tensor.parallel import loss_parallel

from llama_model import ModelArgs, Transformer
from llama_parallelize import parallelize_llama

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 4, "seq": 16, "n_kv_heads": 4, "n_rep": 2, "head_dim": 8, "ffn": 64,
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
    return parallelize_llama(model, mesh, param_dtype=torch.bfloat16,
                             reduce_dtype=torch.float32)


def train_step(model, optimizer, batch, mesh):
    with loss_parallel() if mesh is not None else contextlib.nullcontext():
        pred = model(batch["tokens"])
        loss = F.cross_entropy(pred.flatten(0, 1).float(), batch["labels"].flatten(0, 1))
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
