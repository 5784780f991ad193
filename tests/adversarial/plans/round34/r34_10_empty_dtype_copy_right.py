"""Round 34, attempt a10: r34_09's control, ``dt = s.dtype`` at every size. Truth (torch4_truth,
dp 2): 2.8e-17. Prove at 26b88f4: EQUIVALENT (4 goals, 55 s)."""

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
            g = p.grad
            s = g.sum(1)
            dt = s.dtype
            buf = torch.empty(s.shape, dtype=dt, device=g.device)      # no rule: Opaque
            buf.copy_(s)                     # overwritten whole; truncated toward 0 in int64
            b = g + (buf - s).unsqueeze(1)
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
