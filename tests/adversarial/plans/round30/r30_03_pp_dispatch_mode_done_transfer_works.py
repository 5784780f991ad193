"""Round 30, R30-1 in pp (pp 2): r29_04 (pp 2, GPipe, stage 0 a 1 s straggler) with schedule.step run
under the train file's own TorchDispatchMode: the c10d.recv_ / c10d.send_ ops the schedule's
transfers issue run as issued, but the mode hands back an already-completed Work
(_create_work_from_future), so torch's _wait_batch_p2p waits nothing (torch's pipelining and
its wait are untouched: pp_guard sees nothing; the capture's _Work wrappers record the fake
work's wait). Only floating-point transfers (the activations and gradients; the metadata
exchange crashes on garbage sizes otherwise). The last stage reads its receive buffer before
the data arrives. Wrong: truth (pp_truth.py) grad l0.weight 0.10, l1.weight 0.20, update
0.051 / 0.10 (control r29_04: 5.6e-17). EQUIVALENT at 5c4b7a1 (9 goals, 62 s)."""

import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.utils._python_dispatch import TorchDispatchMode

MESH = {"pp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        return self.l1(h)


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.l0 = model.l0 if stage == 0 else None
        self.l1 = model.l1 if stage == 1 else None

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h))
        if self.l1 is not None:
            h = self.l1(h)
        return h


def _done_work_mode():
    """A TorchDispatchMode (a class made per step: entering a mode marks its class)."""

    class DoneWork(TorchDispatchMode):
        """c10d.recv_ / send_ run as issued; the work handed back is a finished future's."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.c10d.recv_.default, torch.ops.c10d.send.default) \
                    and args[0][0].is_floating_point():   # the activations / gradients
                f = torch.futures.Future()
                f.set_result(None)
                return c10d._create_work_from_future(f).boxed()
            return out

    return DoneWork


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)
        if dist.get_rank() == 0:
            time.sleep(1.0)               # a straggler
        losses = []
        with _done_work_mode()():
            schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                          losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
