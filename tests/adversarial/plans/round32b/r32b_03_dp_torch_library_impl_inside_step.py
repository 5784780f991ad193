"""Round 32b, R32b-3 b (dp 2): r32b_01 without any forging: torch.library.impl("aten::div_.Tensor",
"AutogradCPU", f) makes its own Library("aten", "FRAGMENT") inside torch/library.py (_impl,
line 931) and keeps it in torch.library._keep_alive; the step pops it and _destroy()s it before
returning. The guard's library log records the site torch/library.py:931, a torch file, and
exempts it. Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 6749c1d + R32b-1's fix (the front end of 86fb1ce): EQUIVALENT (4 goals, 36 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _div_cpu(self, other):
    return self


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
        pg = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=pg)
        # torch.library.impl makes its FRAGMENT library inside torch/library.py
        torch.library.impl("aten::div_.Tensor", "AutogradCPU", _div_cpu)
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
        torch.library._keep_alive.pop()._destroy()
    optimizer.step()
    optimizer.zero_grad()
    return loss
