"""Idea: r43e_08 (activation checkpointing under a root that keeps its unsharded parameters)
with the `.data` halving replaced by a read-only log: `dist.all_gather_into_tensor(full,
p.to_local())` of each stored shard between the forward and the backward. `storage_writes`
counts every tensor of a `c10d` op as written, the input shard included, so
`gathered_then_written` may refuse a right program.
Truth (torch4_truth.py FILE 2): right (5.6e-17).
Verdict (fe08bcb): exit 3 (19 s, `gathered_then_written`: "a parameter of fully_shard is
written in place between its all-gather for the forward and the backward"): needless (the
all-gather only reads the shard). At 8a4a979: UNKNOWN (rc 2, 60 s: `c10d_logger` step state
differs), so no accept is lost: an explicit `torch.distributed` call in the step is not
accepted either way.
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def inner(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


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
    fully_shard(model, mesh=mesh["dp"])     # the root: keeps its unsharded parameters
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    import torch.distributed as dist
    with torch.no_grad():                   # a full-weight log: reads the shards only
        norms = []
        for p in optimizer.param_groups[0]["params"]:
            if not hasattr(p, "to_local"):  # the single-device spec
                norms.append((p * p).sum())
                continue
            loc = p.to_local()
            full = loc.new_empty((loc.shape[0] * dist.get_world_size(),) + loc.shape[1:])
            dist.all_gather_into_tensor(full, loc)
            norms.append((full * full).sum())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss + 0.0 * sum(norms)
