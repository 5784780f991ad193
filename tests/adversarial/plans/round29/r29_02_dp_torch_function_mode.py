"""Round 29 (dp only): mlp_ddp.py with the gradient sums issued by dist.all_reduce (synchronous)
under the train file's own TorchFunctionMode: dist.all_reduce hands itself to the mode
(handle_torch_function), which issues ProcessGroup.allreduce (asyncOp False) and never waits.
The node is recorded inside the patched dist.all_reduce, so it is marked. Rank 1 is a 1 s
straggler: rank 0 divides and steps with its own gradient. Wrong."""


import time

import torch
import torch.distributed as dist
from torch import nn
from torch.overrides import TorchFunctionMode

MESH = {"dp": 2}
LATE = 1.0
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class NoWait(TorchFunctionMode):
    """Takes over dist.all_reduce: issues the ProcessGroup's allreduce and keeps the work."""

    def __init__(self, pg):
        super().__init__()
        self.pg = pg
        self.works = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") == "all_reduce" and "group" in kwargs:
            opts = dist.AllreduceOptions()
            opts.reduceOp = dist.ReduceOp.SUM
            opts.asyncOp = False
            self.works.append(self.pg.allreduce([args[0]], opts))
            return None
        return func(*args, **kwargs)


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
        if dist.get_rank() == 1:
            time.sleep(LATE)            # a straggler
        pg = mesh["dp"].get_group()
        with NoWait(pg):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=pg)   # handled by the mode: never waited
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
