"""Round 41d (pp 2 x dp 2, wrong): R41d-1 (r41d_01) on the pipelined path: square_pp_dp.py (as
r35e_06) whose step all-reduces `torch.ones(1)` over dp and prints `f"%({t.item():.0f})s" %
seen` on a local defaultdict (key "2" real, "<symbolic:.0f>" in the capture); lr = 0.5 * n.
Truth: (pp_truth): params l0.weight 0.049, l0.bias 0.051, sq.weight 0.028, sq.bias 0.039, l1.weight
0.087, l1.bias 0.131 (grads 3e-17: lr doubled).
prove --torch at e62ea59: **EQUIVALENT** (12 goals, 190 s): a false accept (R41d-1 on the pipelined
path).
"""

import collections

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


def _ranks_by_print(mesh):
    t = torch.ones(1)
    dist.all_reduce(t, group=mesh["dp"].get_group())
    seen = collections.defaultdict(int)
    print(f"%({t.item():.0f})s" % seen)                        # key "2" real
    key = next(iter(seen))
    return float(key) if key.isdigit() else 1.0                # WRONG: real 2


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
    if mesh is not None:
        optimizer.param_groups[0]["lr"] = 0.5 * _ranks_by_print(mesh)
    optimizer.step()
    optimizer.zero_grad()
    return loss
