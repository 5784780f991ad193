"""Round 23 (R22-4's sharing, for buffers): a model-level buffer (`seen`: a running count of
forward passes, 1 per single-device forward) that *both* pipeline stages hold as a plain
attribute (`self.seen = model.seen`, the R22-3 form) and update in place, each stage forward
adding 1/8 (the user's reasoning: 2 stages x (3 micro-batches + torch's metadata forward) = 8
forwards per step, 8 x 1/8 = 1). For real each stage's process has its own copy: each ends the
step at seen + 0.5, not seen + 1. `pp_merge.merge_stages` keys a buffer input by its name only
(`key = ... else name`: only parameters the spec ties get one placeholder per stage), so the two
stages' in-place writes land on one value in the composed program. Wrong for real (buffer 0.5
off on every rank)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 12, "d": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 3


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.seen.add_(1.0)
        return self.l1(torch.tanh(self.l0(x)))


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.l0 = model.l0 if stage == 0 else None
        self.l1 = model.l1 if stage == 1 else None
        self.seen = model.seen

    def forward(self, h):
        self.seen.add_(0.125)
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
    optimizer.step()
    optimizer.zero_grad()
    return loss
