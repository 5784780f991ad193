"""Round 30, R30-3 (pp 2): r29_04 (GPipe, stage 0 a 1 s straggler) with the module torch's
schedules module calls its transfers through (its global ``dist``) replaced for the step by a
copy of torch.distributed whose ``irecv`` / ``isend`` are other functions (so ``_batch_p2p``
takes its batch_isend_irecv branch) and whose ``batch_isend_irecv`` issues each transfer with
torch's own ``dist.irecv`` / ``dist.isend`` but hands back an already-completed Work. pp_guard
compares only the *callable* attributes of the watched modules: a module attribute replaced (``schedules.dist``) is not
compared. Torch's ``_wait_batch_p2p`` waits nothing: the last stage reads its receive buffer
before the data arrives. Wrong: truth (pp_truth.py) grad l0.weight 0.10, l1.weight 0.20,
update 0.051 / 0.10 (control r29_04: 5.6e-17). EQUIVALENT at 5c4b7a1 (9 goals, 86 s)."""

import time
import types

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, schedules

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


def _done(work):
    f = torch.futures.Future()
    f.set_result(None)
    return c10d._create_work_from_future(f)


def _issue(ops):
    out = []
    for p in ops:
        if p.op is dist.irecv:
            out.append(_done(dist.irecv(p.tensor, group=p.group, tag=p.tag,
                                        group_src=p.group_peer)))
        else:
            out.append(_done(dist.isend(p.tensor, group=p.group, tag=p.tag,
                                        group_dst=p.group_peer)))
    return out


def _no_wait_dist():
    m = types.ModuleType("torch.distributed")
    m.__dict__.update(vars(dist))
    m.irecv = lambda *a, **k: dist.irecv(*a, **k)   # not torch's: the batch branch
    m.isend = lambda *a, **k: dist.isend(*a, **k)
    m.batch_isend_irecv = _issue
    return m


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
        real = schedules.dist
        schedules.dist = _no_wait_dist()  # a module attribute, not a callable
        try:
            losses = []
            schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                          losses=losses)
        finally:
            schedules.dist = real
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
