"""Round 14 adversarial train file: the gradient goes through an int64 buffer on every rank
(``torch.full(shape, 0)`` is int64: the fill literal's type gives the dtype), so every rank
truncates the all-reduced gradient to integers (mostly zeros). The lowering of ``copy_``
ignores the destination's dtype (a float -> int cast is refused for ``_to_copy`` only).
Not rank-specific. Wrong on every rank."""

import torch
import torch._functorch.aot_autograd  # noqa: F401 -- loaded before the step, as after a first step
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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        fill = 0
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            buf = torch.full(p.grad.shape, fill, device=p.grad.device)
            buf.copy_(p.grad)
            p.grad.copy_(buf)
    optimizer.step()
    optimizer.zero_grad()
    return loss
