"""Round 26 (per-stage copies, a right file): every rank keeps the whole model (a naive port:
no layers deleted per stage) and its stage forward runs only its own layers; the optimizer is
built over the stage module's parameters, so each rank also holds a copy of the other stage's
layers, which gets no gradient and which SGD skips. Right for real (a rank never reads the
other stage's copy; its stale value is never used). The per-stage copies would each be compared
with the spec's final value: NOT EQUIVALENT at stage 0's stale `l1.bias` (R26-7, minor; the
used copies' gradients are exact for real, the unused copies stale by 0.05-0.15)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
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
        self.l0, self.l1 = model.l0, model.l1     # both layers on every rank
        self.stage = stage

    def forward(self, h):
        if self.stage == 0:
            return torch.tanh(self.l0(h))
        return self.l1(h)


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["x"],) if stage.is_first else ()
        schedule.step(*args, target=batch["y"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        for p in model.parameters():
            if p.grad is None:
                continue                  # the other stage's layers
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
