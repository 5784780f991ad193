"""Idea: r43d_04 (the usual one-update step with a `no_grad` loss log of the root between
`loss.backward()` and the update) with the update written through `.data` (a hand-written
SGD over the optimizer's sharded parameters). `.data` bumps no version counter of the stored
parameter, so `release_all` does not find the held views stale; FSDP2 keeps the log's
unsharded parameters past the step and step 2 runs on step 1's pre-update values.
Truth: torch4_truth.py FILE 2 says right (5.6e-17: its per-step state_dict reshards);
`--read-last` (one read after step 2): step 2 w1 7.8e-5 / w2 1.4e-4 (wrong, r43d_04's numbers).
Verdict (8a4a979): EQUIVALENT (2 goals, 25 s): R43e-1 (across steps).
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
    _sgd_data(optimizer)                    # the update through `.data`
    optimizer.zero_grad()
    return loss + 0.0 * logged
