"""Round 64b (r64b_07): a right plan (mlp_ddp) that keeps its log in memory: at import, inside a
function, a `logging.StreamHandler(io.StringIO())` on its own logger, its `flush` registered as an
exit callback (a library object's bound method the train file registers: read in full since
15ba917d); the step logs one line. Must stay EQUIVALENT."""
import atexit
import io
import logging


import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}


def _mk_log():
    h = logging.StreamHandler(io.StringIO())
    lg = logging.getLogger("r64b_07")
    lg.setLevel(logging.INFO)
    lg.addHandler(h)
    lg.propagate = False
    atexit.register(h.flush)


_mk_log()
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
    logging.getLogger("r64b_07").info("step done")
    return loss
