"""Round 34c: control of r34c_01: the same ``_reshape_alias`` with row-major strides at every
size.
Truth (torch4_truth, dp 2): 2.8e-17 / 0.0 at both steps. Prove at ae5084f: EQUIVALENT (4
goals, 63 s): right."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            r, c = p.grad.shape
            st = [c, 1]                           # row-major at every size
            g = torch.ops.aten._reshape_alias(p.grad, [r, c], st)
            p.grad.copy_(g.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
