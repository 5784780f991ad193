"""Idea: r43d_02 (the root's no_grad loss log between the first backward and the first update,
then a second update) with `model.reshard()` after the log, as the R43d-2 refusal advises:
FSDP2 frees the unsharded parameters, the second forward gathers the updated shards. A
completeness check of the stop-43 fix (the advice should prove).
Truth (torch4_truth.py FILE 2): right (5.6e-17 / 8.7e-19).
Verdict (8a4a979): EQUIVALENT (4 goals, 24 s): sound, complete.
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
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():                   # the loss once more, for the log
        logged = ((model(x) - y) ** 2).mean()
    if mesh is not None:                    # as the R43d-2 refusal advises
        model.reshard()
    optimizer.step()
    optimizer.zero_grad()
    loss2 = ((model(x) - y) ** 2).mean()    # a second update on the same batch
    loss2.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss2 + 0.0 * logged
