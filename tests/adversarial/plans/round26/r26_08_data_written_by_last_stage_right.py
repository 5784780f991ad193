"""Round 26 (R23-6's fix, a right mirror): the per-class logit prior `lb` (a batch entry) is
tempered in place where it is used, by the last stage only; stage 0 holds its own copy of the
batch and never reads `lb`. Right for real (the batch is not state: it is not kept for the
next step). Expected EQUIVALENT; a goal on stage 0's untouched copy of `lb` would be a wrong
NOT EQUIVALENT."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 2


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        return self.l1(torch.tanh(self.l0(x)))


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
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long),
            "lb": torch.zeros(s["vocab"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def make_loss(lb):
    def loss_fn(pred, y):
        return F.cross_entropy(pred + lb, y)
    return loss_fn


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        batch["lb"].mul_(0.5)
        loss = make_loss(batch["lb"])(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        pp = mesh["pp"]
        if pp.get_local_rank() == pp.size() - 1:
            batch["lb"].mul_(0.5)       # where the prior is used
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=make_loss(batch["lb"]))
        losses = []
        args = (batch["x"],) if stage.is_first else ()
        schedule.step(*args, target=batch["y"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
