"""Round 41d (dp 2, right; false-refusal check): `print(f"loss {loss:.4f}")`, the 0-d loss
tensor formatted with a spec (`Tensor.__format__` -> `.item().__format__` for a plain Tensor; a
fake tensor is a subclass, so `object.__format__` with a spec). Not the statement's own frame:
no placeholder (the R41b-5 family, with a spec).
Truth: (torch4_truth FILE 2): right, w1 5.6e-17, w2 0 after step 1 (5.6e-17 / 5.6e-17 after step 2).
prove --torch at e62ea59: **exit 3** (27 s) "line 53: the step reads a value of its fake tensors
(t.__format__) ... a step that catches the error takes another branch" (the file has no try): a
false refusal, R41b-5 with a spec (still open).
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
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model

import sys


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    print(f"loss {loss:.4f}")                              # a 0-d tensor with a spec
    optimizer.step()
    optimizer.zero_grad()
    return loss
