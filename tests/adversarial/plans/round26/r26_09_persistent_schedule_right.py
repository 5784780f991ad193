"""Round 26 (R26-1's right control): the round-22 MLP, pp 2, the stage and the schedule built
once in parallelize (torchtitan's pattern) and kept across steps; no hooks, nothing that
depends on the step. Right for real (every step the same). The traced step 1 changes the
stage's public flags (`has_backward`, `chunks`, `grad_send_info`): a false refusal (UNKNOWN,
step-state) of the common way to build a schedule."""

import torch
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
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def parallelize(model, mesh):
    pp = mesh["pp"]
    st = Stage(model, pp.get_local_rank())
    stage = PipelineStage(st, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                          group=pp.get_group())
    st.pipe = [stage, ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)]
    return st


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        stage, schedule = model.pipe
        losses = []
        schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                      losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
