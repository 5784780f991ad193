"""Round 12 adversarial train file: r11_09 with the function wrapped: both steps install
`functools.partial(_silu)` of the train file as `torch.nn.functional.silu`. R11-7 marks a torch
module UNCOMPARABLE only for a plain function of the user's modules (`types.FunctionType`); a
partial (or a bound method) is named by its type, `functools.partial`, both steps leave the same
name, so it is accepted. Step 2's forward runs the new silu: halved on the ranks only.
Wrong from step 2 on. (The aot_autograd import loads, before the step, the torch modules
the traced step would import lazily: their finalizers otherwise make every file UNKNOWN, F11-1.)"""

import functools

import torch
import torch._functorch.aot_autograd  # noqa: F401 -- loaded before the step, as after a first step
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _silu(x):
    return torch.sigmoid(x) * x * (0.5 if dist.is_initialized() else 1.0)


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
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    torch.nn.functional.silu = functools.partial(_silu)
    return loss
