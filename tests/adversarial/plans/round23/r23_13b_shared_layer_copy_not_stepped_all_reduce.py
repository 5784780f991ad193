"""(stop 29) r23_13_shared_layer_copy_not_stepped.py with the shared layer's gradient summed by dist.all_reduce
over the pp group (the train file's own send / recv are refused since round 26).

Round 23 (R22-4 for a layer shared across depth, not a tied alias): an ALBERT-style model
applies one `mid` layer (a per-feature gain) twice; split in 2 pipeline stages, each stage applies it once, so each
stage holds a copy of `mid` (its own tensor, in its own process). The gradients of the copies
are summed over pp by hand (send / recv, as r22_16) -- right so far -- but the last stage's
optimizer leaves its copy out (each stage's optimizer holds the parameters it "owns": `mid`
is owned by stage 0). For real the last stage's copy of `mid` is never updated (the next
step's second application uses stale weights). The spec does not tie `mid` under two names,
so `pp_merge` keys both stages' `mid` by one name: one placeholder, stage 0's in-place update
is read as stage 1's copy's final value (R22-4's fix covers only names the spec ties). Wrong
for real."""

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
    if isinstance(model, Stage) and model.l1 is not None:      # mid is owned by stage 0
        return torch.optim.SGD(model.l1.parameters(), lr=0.5)
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
    model.zero_grad()          # the copy outside this stage's optimizer too
    return loss
