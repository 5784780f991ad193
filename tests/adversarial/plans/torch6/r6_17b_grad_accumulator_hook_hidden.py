"""Lead, stop 27 (R6-8 in general): r6_17 with the AccumulateGrad nodes kept where the step-state
fingerprint does not look (an attribute of the ``functools`` module), so the hooks live on and the
step is not UNKNOWN. Round 6's text follows. Parallelize registers, the way pre-2.0 DDP and Apex did, a post-hook on each parameter's
AccumulateGrad node (reached through p.view_as(p).grad_fn) that doubles p.grad; the step is
traced on fresh parameters (new AccumulateGrad nodes) and _refuse_parameter_hooks looks only at
the tensor's own hook dicts. Wrong: every gradient and update 2x."""

import functools

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
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    keep = []
    for p in model.parameters():
        acc = p.view_as(p).grad_fn.next_functions[0][0]
        acc.register_hook(_doubler(p))
        keep.append(acc)
    functools._shardproof_r6_17b = keep
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


def _doubler(p):
    def hook(grad_inputs, grad_outputs):
        p.grad.mul_(2.0)
    return hook
