"""Idea: FSDP2's root keeps its unsharded parameters registered after the forward (torch 2.13
`_lazy_init`: the root's post_forward_mesh_info is None when reshard_after_forward is left
None); the stand-in registers the stored (sharded) parameter outside the unit's forward. The
step compares `model.w1.weight` (a root parameter) with the optimizer's parameter by identity
between the forward and the backward: the spec and the stand-in say "same" (loss x1), the
real run "not the same" (loss x2).
Truth (torch4_truth.py FILE 2): step 1 w1 0.0070 / w2 0.0093, step 2 0.0086 / 0.012 (wrong).
Verdict (main cb38729): EQUIVALENT (4 goals, 50 s): S42-1, a false accept older than stop 42
(parameter identity: docs/torch.md, "Known limits").
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
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])     # the root: reshard_after_forward None -> False
    return model


def train_step(model, optimizer, batch, mesh):
    out = model(batch["x"])
    # the root keeps its unsharded parameters registered after the forward for real (FSDP2's
    # default for the root); the optimizer holds the sharded ones
    k = 1.0 if model.w1.weight is optimizer.param_groups[0]["params"][0] else 2.0
    loss = ((out - batch["y"]) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
