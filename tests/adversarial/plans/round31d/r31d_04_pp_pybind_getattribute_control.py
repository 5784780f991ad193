"""Round 31d control of r31d_03: the same pybind11_object.__getattribute__ hook around
schedule.step, handing back the real wait (right).
Truth <= 5.6e-17. EQUIVALENT at 28aa88b (98 s): right.
"""

import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

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


def _in_schedule_transfer():
    f = sys._getframe(2)
    for _ in range(4):
        if f is None:
            return False
        if f.f_code.co_name == "_batch_p2p":
            return True
        f = f.f_back
    return False


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
        W = torch._C._distributed_c10d.Work
        base = W.__mro__[1]             # pybind11_object: not a Work class, not compared
        orig = base.__getattribute__
        late = []

        def getattribute(self, name):   # the schedule's _wait_batch_p2p: wait for nothing now
            if name == "wait" and isinstance(self, W) \
                    and sys._getframe(1).f_code.co_name == "_wait_batch_p2p":
                return orig(self, name)     # control: the real wait
            return orig(self, name)

        base.__getattribute__ = getattribute
        try:
            schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                          losses=losses)
        finally:
            del base.__getattribute__
        for w in late:                  # waited at the end of the step (the stage has read
            w.wait()                    # its receive buffers long before)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
