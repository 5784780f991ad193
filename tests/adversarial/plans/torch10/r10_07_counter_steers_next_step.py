"""Round 10 adversarial train file: a step counter both steps advance alike (accepted: the same change on both sides); the parallel step divides the all-reduced gradient by the world size at the first step only (`DIVISOR` reads the counter), so from step 2 the gradient is the sum. Only the first step is traced: state both sides change alike steers the next step's program (the R9-4 note, outside the zeros rule).
Wrong from step 2 on."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_STEP = [0]


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x))) * 1.0


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
            p.grad.div_(mesh["dp"].size() if _STEP[0] == 0 else 1)
    optimizer.step()
    optimizer.zero_grad()
    _STEP[0] += 1
    return loss
