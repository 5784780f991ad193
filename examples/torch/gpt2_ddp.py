"""GPT-2 (nanoGPT-shaped, tied embedding) with DDP through the composable ``replicate`` on dp 2.

    prove --torch examples/torch/gpt2_ddp.py
"""

import torch
from torch.distributed._composable.replicate import replicate

from gpt2_model import GPT, GPTConfig

MESH = {"dp": 2}
SIZES = {"batch": 4, "seq": 16, "n_head": 2, "head_dim": 8, "vocab": 64}


def build_model(s):
    return GPT(GPTConfig(block_size=s["seq"], vocab_size=s["vocab"], n_layer=2,
                         n_head=s["n_head"], n_embd=s["n_head"] * s["head_dim"]))


def make_batch(s):
    return {"idx": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "targets": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    # nanoGPT's two parameter groups: weight decay on matrices only
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=6e-4, betas=(0.9, 0.95), foreach=True)


def parallelize(model, mesh):
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    loss = model(batch["idx"], batch["targets"])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss
