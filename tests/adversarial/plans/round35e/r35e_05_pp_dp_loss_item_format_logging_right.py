"""Round 35e (pp 2 x dp 2, right): tests/torch_frontend/pp_plans/square_pp_dp.py with
R35d-5's logging at the end of the step, `print(f"loss {loss.item():.4f}")` (last stage, and
single device). The pipelined capture (pp_capture) does not go through thread_guard.one_thread,
so 7e4c002's `__format__` patch is not active there.
prove --torch at 7e4c002: EQUIVALENT (12 goals, 74 s): right (R35d-5's fix holds on the pipelined
path too). Truth not run (the logging has no effect on the step; square_pp_dp.py is the tested
right plan).
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 2
SQ_GRAD_SCALE = 1.0          # the wrong mirror sets 2.0


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.sq = nn.Linear(h, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        return self.l1(torch.tanh(h + self.sq(h)))


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.l0 = model.l0 if stage == 0 else None
        self.sq = model.sq if stage == 0 else None
        self.l1 = model.l1 if stage == 1 else None

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h))
            h = torch.tanh(h + self.sq(h))
        if self.l1 is not None:
            h = self.l1(h)
        return h


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
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
        if model.sq is not None:
            model.sq.weight.grad.mul_(SQ_GRAD_SCALE)
    optimizer.step()
    optimizer.zero_grad()
    if loss is not None:
        print(f"loss {loss.item():.4f}")                # logging only
    return loss
