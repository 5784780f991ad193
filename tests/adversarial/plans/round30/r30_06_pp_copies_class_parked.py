"""Round 30, R30-2 by another door (pp 2, across steps): r29_07 (the stage and schedule kept as
copy.copy shallow copies held by an atexit registration) with the copies' ``__class__`` set to
the train file's own empty class when the step returns: the scan of the fix for R29-3
(pp_guard.live_pipeline_objects: ``issubclass(type(o), (stage base, schedule base))``) does
not match them, and the copies were built by no constructor (no weak reference). The next step
finds the parked objects by a gc scan and sets their classes back. Wrong: truth
(plans/round26/pp_truth_steps.py FILE 3) step 1 6.9e-18, step 2 grad l0.weight 0.029, update
0.015, step 3 grad 0.038. EQUIVALENT at 5c4b7a1 (9 goals, 56 s)."""


import abc
import atexit
import copy
import gc

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


def _half(g):
    return g * 0.5


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        h.register_hook(_half)
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
            if h.requires_grad:
                h.register_hook(_half)
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


def _parked():
    """A class for the kept copies while parked (made per step: an ABC subclass as a global
    is state prove --torch cannot read)."""

    class Parked(abc.ABC):
        pass

    return Parked


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        parked = [o for o in gc.get_objects() if type(o).__name__ == "Parked"]
        for o in parked:                  # step 1's copies: their classes back
            o.__class__ = ScheduleGPipe if "_stage" in vars(o) else PipelineStage
        pipe = next(((o._stage, o) for o in parked if type(o) is ScheduleGPipe), None)
        if pipe is None:                  # built on the first step
            pp = mesh["pp"]
            stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                                  group=pp.get_group())
            schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)
        else:
            stage, schedule = pipe
        losses = []
        schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                      losses=losses)
        kept_stage = copy.copy(stage)     # kept for the next step: no constructor runs
        kept = copy.copy(schedule)
        kept._stage = kept_stage
        atexit.register(lambda k=(kept_stage, kept): None)   # held, not on a torch class
        parked_cls = _parked()
        kept_stage.__class__ = parked_cls  # no pipeline class while the step is checked
        kept.__class__ = parked_cls
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
