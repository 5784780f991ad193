"""Idea: FSDP2's root is the first state whose forward runs (`FSDPState._lazy_init`), not the
outermost `fully_shard` module; the stand-in's `fsdp_hold.is_root` takes the unit under no
other `fully_shard` module. `parallelize` shards `w1`, `w2` and the MLP; `train_step` calls
`model.w1` and `model.w2` directly (the MLP's own forward never runs). For real `w1` (and
`w2`) become roots (reshard_after_forward None -> not resharded after the forward): after
`model.w1(x)`, `model.w1.weight` is the unsharded parameter, not the optimizer's. r42_01's
identity test (loss x1 if the same, x2 if not): the spec and the stand-in (w1 not a root:
stored registered back) say "same", the real run "not the same".
Truth (torch4_truth.py FILE 2): step 1 w1 0.0070 / w2 0.0093, step 2 0.0086 / 0.012 (wrong).
Verdict (f7d58ae): EQUIVALENT (4 goals, 55 s): R43d-3, a false accept.
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
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])     # never called: w1's forward runs first
    return model


def train_step(model, optimizer, batch, mesh):
    h = model.w1(batch["x"])
    k = 1.0 if model.w1.weight is optimizer.param_groups[0]["params"][0] else 2.0
    out = model.w2(nn.functional.silu(h))
    loss = ((out - batch["y"]) ** 2).mean() * k
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
