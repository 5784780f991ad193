"""Idea: S42-1's fix, a right program: the step branches on whether the root's `w1.weight` is a
DTensor after the forward (loss x2 if so). FSDP2's root keeps its unsharded parameters (plain
tensors without TP) registered after the forward, so the real run and the spec both take x1;
before the fix the stand-in registered the stored (sharded DTensor) parameter there.
Truth (torch4_truth.py FILE 2): right: step 1 w1 5.6e-17 / w2 0, step 2 5.6e-17 / 5.6e-17.
Verdict (s421, 629a39a) EQUIVALENT (54 s); before the fix (268389e) NOT EQUIVALENT (68 s, 2.000 x
spec: a false refutation).
"""
MESH = {"dp": 2}
import torch
from torch import nn
from torch.distributed.tensor import DTensor

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
    # after the forward: FSDP2 registers the unsharded (plain) parameter when the root keeps it,
    # the sharded DTensor when it reshards
    k = 2.0 if isinstance(model.w1.weight, DTensor) else 1.0
    loss = ((out - batch["y"]) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
