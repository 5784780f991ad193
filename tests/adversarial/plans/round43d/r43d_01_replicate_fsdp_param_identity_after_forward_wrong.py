"""Idea: S42-1 through torch 2.13's FSDP-based `replicate` (`replicate_with_fsdp`). Its
`_init_param_group` passes `post_forward_mesh_info=None` for *every* unit (root or not): the
unsharded parameters (plain tensors) stay registered after the forward until the backward.
The S42-1 fix gives a `Hold` only to `fully_shard` units (`u.kind == "fsdp"`); a `replicate`
unit's post-hook registers the stored parameter back after the forward. r42_01's identity test
(loss x1 if `model.w1.weight` is the optimizer's parameter, x2 if not) between the forward and
the backward: the spec and the stand-in say "same", the real run "not the same".
Truth (torch4_truth.py FILE 2): step 1 w1 0.0070 / w2 0.0093, step 2 0.0086 / 0.012 (wrong).
Verdict (f7d58ae): EQUIVALENT (4 goals, 51 s): R43d-1, a false accept.
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate_with_fsdp import replicate
    replicate(model, mesh=mesh["dp"])    # FSDP-based: no reshard after forward, any unit
    return model


def train_step(model, optimizer, batch, mesh):
    out = model(batch["x"])
    k = 1.0 if model.w1.weight is optimizer.param_groups[0]["params"][0] else 2.0
    loss = ((out - batch["y"]) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
