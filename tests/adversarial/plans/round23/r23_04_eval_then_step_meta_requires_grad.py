"""Round 23: a pre-step evaluation (`schedule.eval(...)`, e.g. to log the loss before the
update) followed by `schedule.step(...)` on the same schedule. Torch runs its DYNAMIC metadata
inference twice: for eval (has_backward False: stage 0's metadata forward under no_grad, its
output meta says requires_grad=False, so stage 1's metadata-forward input does not require
grad) and again for step (mode switch: requires_grad=True). prove --torch answers *both* of
stage 1's `_recv_meta` calls with the one output metadata stage 0's trace recorded last
(`rec.out_meta`, the training one: requires_grad=True). The last stage branches on it: when it
sees an input that does not require grad with grad mode off (only torch's eval metadata
forward, for real) it switches a scale on for the rest of the step. Wrong for real: the
logits of every training micro-batch are doubled."""

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
        self.l0 = model.l0 if stage == 0 else None
        self.l1 = model.l1 if stage == 1 else None
        self.scale = 1.0

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h))
        if self.l1 is not None:
            if not torch.is_grad_enabled() and not h.requires_grad:
                self.scale = 2.0
            h = self.l1(h) * self.scale
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
        args = (batch["x"],) if stage.is_first else ()
        schedule.eval(*args, target=batch["y"], losses=[])      # the loss before the step
        losses = []
        schedule.step(*args, target=batch["y"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
        model.scale = 1.0
    optimizer.step()
    optimizer.zero_grad()
    return loss
