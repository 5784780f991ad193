"""Round 38a (dp 2, right): plain data parallelism (per-gradient all-reduce of the loss / ws)
with `torch.optim.Adam(foreach=True)`: its `_foreach_lerp_` / `_foreach_addcmul_(exp_avg_sqs,
grads, grads, ...)` / `_foreach_addcdiv_` pass one list twice and write lists of distinct
storages: `written_twice` must not fire.
Truth (torch4_truth.py FILE 1): w1 3e-17, w2 3e-17 (right).
Verdict (main 4d89de3): EQUIVALENT (10 goals, 53 s): no false refusal.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
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
    return torch.optim.Adam(model.parameters(), lr=0.1, foreach=True)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
