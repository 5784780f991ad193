"""Round 15 adversarial train file: the dp average's scale 1/ws is filled into an int64
0-dim tensor (``scale.fill_(0.5)`` truncates to 0), so every rank's gradient is zeroed. The
fill rules lower the literal whatever the tensor's dtype (``rules_elementwise._fill_value``).
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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            scale = torch.zeros((), dtype=torch.int64, device=p.grad.device)
            scale.fill_(1.0 / mesh["dp"].size())     # int64: truncated to 0
            p.grad.mul_(scale)
    optimizer.step()
    optimizer.zero_grad()
    return loss
