"""Adversarial round 56d: the step counter is the NAME of a global of the train file itself: a ``str`` subclass key ``_Key("c<n>")`` whose ``__format__`` returns a constant. ``step_state`` names the train file's globals by ``f"the global {k} of ..."`` (the key's own ``__format__`` runs: user code in the fingerprint) and reads the value (None): the entry is the same in every step while the key, which the step reads, counts. No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}


class _Key(str):
    def __format__(self, spec):
        return "r56d"


def _count():
    return next(int(k[1:]) for k in list(globals()) if type(k) is _Key)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        n = _count()
        if n:
            _double(model)
        g = globals()
        del g[f"c{n}"]
        g[_Key(f"c{n + 1}")] = None
    optimizer.step()
    optimizer.zero_grad()
    return loss


globals()[_Key("c0")] = None     # set when the train file is imported (n = 0)
