"""Idea: r43d_02 (a no_grad loss log of the root between the first backward and the first
update, then a second update) with the update written through `.data` (a hand-written SGD:
`p.data.add_(p.grad.data, alpha=-0.1)`), which bumps no version counter of the stored
parameter: `Hold.stale` compares version counters, so the held no_grad views are not found
stale; the grad forward gathers the updated shards (as the spec) while FSDP2 reuses the old
unsharded parameters.
Truth (torch4_truth.py FILE 2): step 1 w1 2.1e-4 / w2 2.5e-4, step 2 2.5e-4 / 3.4e-4 (wrong;
r43d_02's numbers).
Verdict (8a4a979): EQUIVALENT (2 goals, 24 s): R43e-1, a false accept.
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


def _sgd_data(optimizer):
    with torch.no_grad():
        for p in optimizer.param_groups[0]["params"]:   # the sharded ones
            p.data.add_(p.grad.data, alpha=-0.1)


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():                   # the loss once more, for the log
        logged = ((model(x) - y) ** 2).mean()
    _sgd_data(optimizer)                        # the update through `.data`
    optimizer.zero_grad()
    loss2 = ((model(x) - y) ** 2).mean()    # a second update on the same batch
    loss2.backward()
    _sgd_data(optimizer)
    optimizer.zero_grad()
    return loss2 + 0.0 * logged
