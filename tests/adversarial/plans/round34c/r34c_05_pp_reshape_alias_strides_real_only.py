"""Round 34c: R34c-1 (``_reshape_alias``'s strides at the real sizes only) on the pipelined
path: tests/torch_frontend/pp_plans/square_pp_dp.py (2 stages x dp 2, GPipe, 2 micro-batches;
r34_08's file) with stage 0's square ``sq.weight`` gradient read back through
``_reshape_alias(g, [r, c], [1, r] if r == 16 else [c, 1])``: row-major at the probe sizes, a
transpose at the real sizes (h = 16).
Truth (pp_truth): sq.weight grad 0.072, param 0.036 (every other parameter <= 5.6e-17). Prove
at ae5084f: **EQUIVALENT** (12 goals, 95 s): finding R34c-1 on the pipelined path."""

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
            g = model.sq.weight.grad
            r, c = g.shape
            st = [1, r] if r == 16 else [c, 1]    # column-major at the real sizes only (h 16)
            t = torch.ops.aten._reshape_alias(g, [r, c], st)
            g.copy_(t.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
