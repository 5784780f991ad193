"""Round 28 (dp only): mlp_ddp.py with the gradient sums issued on the ProcessGroup object,
`pg.allreduce([g], opts)` with `opts.asyncOp = False` (what dist.all_reduce(async_op=False) passes;
that call then waits the work in Python, this file does not). The traced node carries
async_op=False, so the rule lowers it as synchronous; gloo runs it in the background whatever
the flag. Rank 1 is a 1 s straggler: rank 0 divides and steps with its own gradient. Wrong."""

import time

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
LATE = 1.0
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
        if dist.get_rank() == 1:
            time.sleep(LATE)            # a straggler
        pg = mesh["dp"].get_group()
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.SUM
        opts.asyncOp = False
        works = [pg.allreduce([p.grad], opts) for p in model.parameters()]
        for p in model.parameters():    # BUG: the works are never waited
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
