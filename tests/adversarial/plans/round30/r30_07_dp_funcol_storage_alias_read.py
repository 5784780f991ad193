"""Round 30 (R28-1 through a storage alias): r28_01 with the functional all-reduce's buffer read
before its wait_tensor through a tensor set_ onto the buffer's *storage*
(``torch.empty(0).set_(g.untyped_storage(), ...)``): the set_ node's argument is a storage,
not the buffer's node, so waits.PendingCollectives may not see the alias. Wrong (r28_01's
race: rank 1 a 1 s straggler). At 5c4b7a1: exit 3 (the capture fails: "NotImplementedError:
argument of type: <class 'torch.storage.UntypedStorage'>", 16 s): sound."""

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
        name = mesh["dp"].get_group().group_name
        outs = []
        for p in model.parameters():
            g = torch.ops._c10d_functional.all_reduce(p.grad, "sum", name)
            a = torch.empty(0, dtype=g.dtype).set_(g.untyped_storage(), 0, g.shape, g.stride())
            p.grad.copy_(a / mesh["dp"].size())     # BUG: read before wait_tensor (an alias)
            outs.append(g)
        for g in outs:
            torch.ops._c10d_functional.wait_tensor(g)
    optimizer.step()
    optimizer.zero_grad()
    return loss
