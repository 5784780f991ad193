"""Round 31, R31-2 (pp 2, GPipe, stage 0 a 1 s straggler): nothing of the
train file runs while the step is traced. At import the train file registers its own CPU
kernel of c10d::recv_ (torch.library, IMPL): a floating-point receive is issued on the process
group's backend directly (ProcessGroup._get_backend(cpu).recv, no dispatcher) and an
already-completed Work is handed back (the backend's work is waited at the end of the step),
so the stage reads its receive buffers before the activations / gradients arrive. The capture
traces on fake tensors: the Meta kernel runs there, never this one. Wrong: truth
(tests/torch_frontend/pp_truth.py FILE) grad l0.weight 0.10, l1.weight 5.5e+256 (garbage
read), update 0.051 / 2.7e+256. EQUIVALENT at 0f22574 (9 goals, 139 s)."""

import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}
_LATE = []
_PG = []        # the pipeline group, as torch.distributed hands it (set for the step)
_LIB = torch.library.Library("c10d", "IMPL")


def _recv_cpu(tensors, process_group, src, tag):
    work = _PG[0]._get_backend(torch.device("cpu")).recv(tensors, src, tag)
    if not tensors[0].is_floating_point():     # the metadata: as torch does
        return work.boxed()
    _LATE.append(work)
    f = torch.futures.Future()
    f.set_result(list(tensors))
    return c10d._create_work_from_future(f).boxed()


_LIB.impl("recv_", _recv_cpu, "CPU")


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
        _PG.append(pp.get_group())
        try:
            schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                          losses=losses)
        finally:
            for w in _LATE:            # waited at the end of the step (read long before)
                w.wait()
            _LATE.clear()
            _PG.clear()
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
