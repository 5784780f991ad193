"""Round 64c (r64c_05): a right plan (mlp_ddp) that at import parses a binary dataset header
with a ``ctypes.Structure``'s ``from_buffer_copy`` (the usual idiom for a fixed-layout file
header: magic, version, record count). Nothing of the step changes. fc098f2b records
"ctypes.cdata/buffer" from code not the front end's own: the audit entry is unreadable in
every fingerprint. The Structure class is made inside the function (a module-level one is
unreadable as a global on its own, older: r64c_01 at fc098f2b^). Must stay EQUIVALENT."""
import ctypes
import struct

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}


def _read_count(raw):
    class _Header(ctypes.Structure):
        _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint32),
                    ("count", ctypes.c_uint64)]

    return int(_Header.from_buffer_copy(raw).count)


N_RECORDS = _read_count(struct.pack("<IIQ", 0x5348_4152, 1, 4096))
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
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
