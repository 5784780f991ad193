"""Round 9 adversarial train file: the parallel step zeroes the gradients in place (`zero_grad(set_to_none=False)`), the
single-device one sets them to None (the R6-9 rule: compared with zeros, "provided the next step
gives the parameter a gradient"); from step 2 the forward detaches w1's output (a step counter both
sides advance alike), so w1 gets no gradient: SGD with momentum skips w1 on the single-device side
(None) and moves it by its momentum on the parallel side (zeros).
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
        h = self.w1(x)
        if _STEP[0] >= 1:
            h = h.detach()
        return self.w2(nn.functional.silu(h))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


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
    optimizer.zero_grad(set_to_none=mesh is None)
    _STEP[0] += 1
    return loss
