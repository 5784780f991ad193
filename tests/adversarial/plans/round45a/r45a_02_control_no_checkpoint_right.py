"""Control (right): r45a_01 without the checkpoint and the identity read. Was idea of 01: unit w1 (square) runs twice in the root's forward: first inside a non-reentrant
checkpoint whose output uses it only detached (silu(h0) * w1(x).detach(): its output hook never
fires), then outside on the checkpoint's output. Backward: w1's second call pre-backward
(state PRE_BACKWARD), its RegisterPostBackward reshards (group POST_BACKWARD); then the
checkpoint recomputes w1's first call: torch 2.13 ``_pre_forward`` sees the state PRE_BACKWARD,
unshards again and returns; ``_post_forward`` returns early. The final callback skips groups in
POST_BACKWARD: w1 stays unsharded after the backward (next step's forward reuses the stale
unsharded values). After backward, train_step doubles p1.grad when model.w1.weight is not p1.
Spec: always p1. Stand-in: releases w1 at its final callback (is p1).
"""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class M(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, h, bias=False)

    def region(self, h0, x):
        return nn.functional.silu(h0) * self.w1(x).detach()

    def forward(self, x):
        h0 = self.w0(x)
        a = self.region(h0, x)
        return self.w1(a)


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return M(s["hidden"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    p1 = optimizer.param_groups[0]["params"][1]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
