"""Round 30, R30-1 (dp 2): r29_02 (mlp_ddp.py, rank 1 a 1 s straggler) with the gradient sums
issued by a *plain* dist.all_reduce (group: torch's ProcessGroup, no torch function mode, a
plain tensor: all_reduce_mark.plain_call holds, the node is marked) under the train file's own
TorchDispatchMode (a dispatch mode, not a function mode): the mode lets c10d.allreduce_ run on
the tensor given but hands dist.all_reduce an already-completed Work
(torch._C._distributed_c10d._create_work_from_future), so dist.all_reduce's work.wait() waits
nothing and gloo reduces in the background; rank 0 divides and steps with its own gradient.
Wrong: truth (torch4_truth.py FILE 2) step 1 update w1 0.0067, w2 0.010; step 2 0.0074 / 0.013
(control r30_02: 5.6e-17). EQUIVALENT at 5c4b7a1 (4 goals, 81 s)."""


import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

MESH = {"dp": 2}
LATE = 1.0
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _done_work_mode():
    """A TorchDispatchMode (a class made per step: entering a mode marks its class)."""

    class DoneWork(TorchDispatchMode):
        """c10d.allreduce_ runs as issued; the work dist.all_reduce waits is a finished
        future's."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.c10d.allreduce_.default:
                tensors, _work = out
                f = torch.futures.Future()
                f.set_result(list(tensors))
                return tensors, c10d._create_work_from_future(f).boxed()
            return out

    return DoneWork


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
        with _done_work_mode()():
            for p in model.parameters():
                dist.all_reduce(p.grad, group=pg)   # its wait is a finished future's
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
