"""(stop 29) r23_14_shared_layer_right.py with the shared layer's gradient summed by dist.all_reduce
over the pp group (the train file's own send / recv are refused since round 26).

Round 23 (the right mirror of r23_13, R23-7): the same ALBERT-style shared gain `mid`, its
two stage copies' gradients summed over pp by hand, and *every* stage's optimizer stepping its
own copy: each copy gets the full gradient once, as single-device: right. In the composed
program both copies are one placeholder (the spec does not tie `mid` under two names), updated
twice."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 2


class Scale(nn.Module):
    """A per-feature gain (a square Linear has a repeated dim: not supported)."""

    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x):
        return x * self.weight


class Shared(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.mid = Scale(h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        h = torch.tanh(self.mid(h))
        h = torch.tanh(self.mid(h))
        return self.l1(h)


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.l0 = model.l0 if stage == 0 else None
        self.mid = model.mid
        self.l1 = model.l1 if stage == 1 else None

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h))
        h = torch.tanh(self.mid(h))
        if self.l1 is not None:
            h = self.l1(h)
        return h


def build_model(s):
    return Shared(s["d"], s["h"], s["vocab"])


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
        pg = pp.get_group()
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pg)
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["x"],) if stage.is_first else ()
        schedule.step(*args, target=batch["y"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        for p in model.mid.parameters():          # sum the shared layer's gradient over pp
            dist.all_reduce(p.grad, group=pg)
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
