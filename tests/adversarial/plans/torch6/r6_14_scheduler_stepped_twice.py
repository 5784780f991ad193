"""Round 6 adversarial train file: a StepLR scheduler (step_size 3, gamma 0.5) kept on the
optimizer is stepped once per step by the single-device program and twice by the parallel one.
After step 1 both leave lr = 0.1 (only the scheduler's own counter, last_epoch, differs: 1 vs
2); after step 2 the parallel rate is 0.05, the single-device one 0.1. Wrong from step 3 on."""

import os

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
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return _with_scheduler(torch.optim.SGD(model.parameters(), lr=0.1))


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
    optimizer.scheduler.step()
    if mesh is not None:
        optimizer.scheduler.step()
    return loss


def _with_scheduler(opt):
    opt.scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    return opt
