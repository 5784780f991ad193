"""Round 34c, false-refusal sweep: a right hand-written DDP (dp 2) whose forward runs its
matmuls in bfloat16 (``.to(torch.bfloat16)`` casts of the input, the activations and the
weights, cast back to the input's dtype): the dtype check of aligned twins must not refuse
casts that are the same at both sizes.
Truth (torch4_truth, dp 2): 2.7e-5 / 1.8e-5 at both steps: bfloat16 rounding only (each
rank's backward matmuls round other partial sums; equal over the reals). Prove at ae5084f:
EQUIVALENT (4 goals, 16 s): no false refusal from the dtype check."""

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
        dt = x.dtype                      # mixed precision: matmuls in bfloat16
        h = nn.functional.linear(x.to(torch.bfloat16), self.w1.weight.to(torch.bfloat16))
        h = nn.functional.silu(h.to(dt))
        return nn.functional.linear(h.to(torch.bfloat16), self.w2.weight.to(torch.bfloat16)).to(dt)


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
    optimizer.step()
    optimizer.zero_grad()
    return loss
