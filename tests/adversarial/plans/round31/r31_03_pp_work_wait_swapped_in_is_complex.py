"""Round 31, R31-1 (pp 2, GPipe, stage 0 a 1 s straggler): no mode at all.
torch.Tensor.is_complex, asked by dist.irecv inside torch's schedule transfers (after the
capture's p2p guard), sets the wait of every Work class of torch._C._distributed_c10d (Work,
FakeWork, PythonCallbackWork: the same code on the real and the fake process group) to a
no-op that puts the very originals back when the schedule's _wait_batch_p2p calls it (before
the next action's guard) and keeps the work, waited at the end of the step: the stage reads
its receive buffers (activations, gradients) before they arrive. No node is recorded while
train-file code is on the stack. Wrong: truth (tests/torch_frontend/pp_truth.py FILE) grad
l0.weight 0.056, l1.weight 0.20, update 0.028 / 0.10 (control r31_04: <= 5.6e-17).
EQUIVALENT at 0f22574 (9 goals, 37 s)."""

import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

# every Work class torch's c10d defines (Work, and its subclasses with their own wait)
WORKS = [v for v in vars(torch._C._distributed_c10d).values()
         if isinstance(v, type) and issubclass(v, torch._C._distributed_c10d.Work)]
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
        orig_wait = {w: w.__dict__["wait"] for w in WORKS}

        def restore():
            for w, f in orig_wait.items():
                setattr(w, "wait", f)       # the very objects again

        late = []

        def no_wait(self, *a, **k):     # the receive's work.wait(): waits nothing (now)
            restore()
            late.append(self)
            return True

        def is_complex(self):      # irecv asks it after the capture's checks
            if sys._getframe(1).f_code.co_name == "irecv" and self.is_floating_point() \
                    and _in_schedule_transfer():      # the activations / gradients
                for w in WORKS:
                    w.wait = no_wait
            return torch._C.TensorBase.is_complex(self)

        torch.Tensor.is_complex = is_complex
        try:
            schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                          losses=losses)
        finally:
            del torch.Tensor.is_complex
            restore()
        for w in late:                  # waited at the end of the step (the stage has read
            w.wait()                    # its receive buffers long before)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
