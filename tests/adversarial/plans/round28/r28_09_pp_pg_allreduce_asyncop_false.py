"""Round 28 (R27-2 after its fix, on the pipeline group): r27_19's tied-gradient sum issued on
the ProcessGroup object, `pg.allreduce([g], opts)` with `opts.asyncOp = False`, so the traced
node carries async_op=False and pp_merge composes it as synchronous; the first stage reads the
tied gradient (its squared norm) before `work.wait()`, and the last stage comes 1 s late. gloo
reduces in the background whatever the flag. Wrong (deterministic with the straggler)."""

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 2
MAX_NORM = 0.05
LATE = 1.0


class Tied(nn.Module):
    def __init__(self, v, h):
        super().__init__()
        self.emb = nn.Embedding(v, h)
        self.gain = nn.Parameter(torch.ones(h))
        self.head = nn.Linear(h, v, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tok):
        return self.head(torch.tanh(self.emb(tok)) * self.gain)


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.emb = model.emb if stage == 0 else None
        self.gain = model.gain if stage == 1 else None
        self.head = model.head if stage == 1 else None

    def forward(self, h):
        if self.emb is not None:
            h = torch.tanh(self.emb(h))
        if self.head is not None:
            h = self.head(h * self.gain)
        return h


def build_model(s):
    return Tied(s["vocab"], s["h"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], dtype=torch.long),
            "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def clip(grads, pg=None):
    sq = sum((g * g).sum() for g in grads)
    if pg is not None:
        dist.all_reduce(sq, group=pg)
    coef = torch.clamp(MAX_NORM / (sq.sqrt() + 1e-6), max=1.0)
    return coef


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
        coef = clip([p.grad for p in model.parameters()])
        for p in model.parameters():
            p.grad.mul_(coef)
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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
        g = model.emb.weight.grad if stage.is_first else model.head.weight.grad
        if stage.is_last:
            time.sleep(LATE)            # the last stage comes later (its own work)
        # the tied sum in flight while each stage computes its part of the squared norm
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.SUM
        opts.asyncOp = False            # traced as synchronous; the work is still not waited
        work = pg.allreduce([g], opts)
        mine = [g] if stage.is_first else [model.gain.grad]
        sq = sum((t * t).sum() for t in mine)
        work.wait()
        dist.all_reduce(sq, group=pg)
        coef = torch.clamp(MAX_NORM / (sq.sqrt() + 1e-6), max=1.0)
        for p in model.parameters():
            p.grad.mul_(coef)
    optimizer.step()
    optimizer.zero_grad()
    return loss
