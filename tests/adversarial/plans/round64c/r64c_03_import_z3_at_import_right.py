"""Round 64c (r64c_03): a right plan (mlp_ddp) that imports z3 at the top (to check its sizes'
constraints once at import). z3's import registers ``_file_manager.close`` (an
``ExitStack``'s bound method) as exit callback, and checking calls ``from_buffer_copy``. With
fc098f2b only callbacks present before the train file ran are read by identity: the ExitStack
is read in full (TOO_DEEP); "ctypes.cdata/buffer" is recorded. Must stay EQUIVALENT."""
import z3

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}

_s = z3.Solver()
_h, _f = z3.Ints("h f")
_s.add(_h == 6, _f == 10, _f > _h)
assert str(_s.check()) == "sat"
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
