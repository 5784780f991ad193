"""Round 12 adversarial train file: a first-step flag kept as whether a `weakref.finalize` is
alive: its callback is torch's (`torch.zeros`), so "finalizers pending" skips it (torch's own
finalizers are not read since round 11), and the finalize object itself (`__slots__ = ()`) is
read as its type only. The step detaches it; the parallel step divides the all-reduced gradient
by the world size at the first step only.
Wrong from step 2 on. (The aot_autograd import loads, before the step, the torch modules
the traced step would import lazily: their finalizers otherwise make every file UNKNOWN, F11-1.)"""

import torch
import torch._functorch.aot_autograd  # noqa: F401 -- loaded before the step, as after a first step
import torch.distributed as dist
from torch import nn
import weakref

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class _Anchor:
    pass


_ANCHOR = _Anchor()
_FIN = weakref.finalize(_ANCHOR, torch.zeros, 1)


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
            p.grad.div_(mesh["dp"].size() if _FIN.alive else 1)
    optimizer.step()
    optimizer.zero_grad()
    _FIN.detach()
    return loss
