"""Adversarial round 56d: the step counter is the payload of a NaN: the train file's own global ``R56D`` is rebound each step to a quiet NaN whose low mantissa bits are ``n + 1`` (``struct``). Floats are read by value through ``float.__repr__`` (``process_state._data_text``; the train file's globals through ``step_state``'s encoder), which prints every NaN as ``nan``: not one-to-one. The same in another module's global or ``__doc__`` (unit tests). No tracer object is reached. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def _nan(n):
    import struct
    return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000 | n))[0]


def _count():
    import struct
    return struct.unpack("<Q", struct.pack("<d", R56D))[0] & 0xFFFFFFFF


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    global R56D
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        n = _count()
        if n:
            _double(model)
        R56D = _nan(n + 1)
    optimizer.step()
    optimizer.zero_grad()
    return loss


R56D = _nan(0)     # a NaN (payload 0) when the train file is imported (n = 0)
