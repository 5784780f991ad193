"""Round 10 adversarial train file: the parallel step starts a timer thread that halves a global 2 s later, after `prove --torch` has taken its after-step fingerprint; the next forward joins the thread (found through `threading.enumerate()`, no state of the file holds it) and reads the halved global.
Wrong from step 2 on."""

import threading
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_SCALE = 1.0


def _halve():
    global _SCALE
    _SCALE = 0.5


def _settle():
    for t in threading.enumerate():
        if t.name == "r10-halve":
            t.join()
    return _SCALE


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x))) * _settle()


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
    if mesh is not None:
        t = threading.Timer(2.0, _halve)
        t.name = "r10-halve"
        t.start()
    return loss
