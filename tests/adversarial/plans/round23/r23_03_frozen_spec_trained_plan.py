"""Round 23 (frozen parameters, non-pipelined path): build_model freezes w1 (fine-tuning only
w2); parallelize unfreezes it again (a `requires_grad_(True)` loop over model.parameters(), as
a wrapper that "makes sure everything is trainable" would); train_step re-freezes w1 before it
returns on both sides (a no-op single-device), so every requires_grad leaves the step alike.
The parallel step computes w1's gradient and SGD updates w1; the single-device step leaves w1
untouched. Wrong: w1 moves in the parallel step."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w1.weight.requires_grad_(False)       # fine-tune the head only
    return m


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad, group=mesh["dp"].get_group())
                p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    model.w1.weight.requires_grad_(False)
    return loss
