"""Issue 11 (dp 2 x tp 2, wrong): a hand-written DDP (the model replicated over tp, as
round 34b's r34b_05) whose gradient all-reduce runs over ``dist.new_group([0, 1, 2, 3])``, the
whole world, and divides by the dp size: every gradient doubled. Must never be EQUIVALENT.
Truth (tests/adversarial/tp_truth.py FILE): 0.0093 on every rank. UNKNOWN ("process group '5'
is not one of the mesh's axes", 194 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    _G["dp"] = dist.new_group(ranks=[0, 1, 2, 3])   # wrong: the whole world, not dp
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
