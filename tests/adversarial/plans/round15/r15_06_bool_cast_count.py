"""Round 15 adversarial train file: the summed gradient is divided by ``bool(ws)`` (an int64
2 cast to bool is True, then 1.0): the gradient is not averaged. ``_to_copy`` refuses only a
float -> int cast; int -> bool is lowered as the identity. Not rank-specific. Wrong on every
rank."""

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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            ws = torch.full((), mesh["dp"].size(), device=p.grad.device)   # int64 2
            p.grad.div_(ws.bool().to(p.grad.dtype))   # bool(2) is True: divides by 1
    optimizer.step()
    optimizer.zero_grad()
    return loss
