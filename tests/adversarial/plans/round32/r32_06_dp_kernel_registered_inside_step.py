"""Round 32, R32-4 (dp 2; the gap docs/torch.md lists as not seen): r31_10's wrong kernel
(aten::div_.Tensor returns its input: the all-reduced gradient left summed) registered *inside*
the step, after the last collective, and removed again (Library._destroy()) before train_step
returns. The dispatcher guard compares after the import, after the step, and the c10d operators
around each guarded collective: no check point falls between the registration and its removal.
The capture runs the step too (registering and removing the kernel) but traces on fake tensors,
whose div_ never reaches the AutogradCPU / CPU keys. Registered on AutogradCPU, a key with no
kernel of div_ before: a first draft on CPU made torch warn "Overriding a previously registered
kernel", whose __warningregistry__ in torch.library the step-state comparison saw (UNKNOWN
step-state, 40 s). Wrong: truth (torch4_truth.py FILE 2) update w1 0.0070, w2 0.0093; step 2
0.0086 / 0.012 (as r31_10). EQUIVALENT at ddc6b7a (4 goals, 21 s)."""

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
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("div_.Tensor", _div_cpu, "AutogradCPU")
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
        lib._destroy()
    optimizer.step()
    optimizer.zero_grad()
    return loss
