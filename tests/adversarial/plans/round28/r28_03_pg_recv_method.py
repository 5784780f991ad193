"""Round 28 (R26-3 through the ProcessGroup object: `pg.recv([t], src, tag)`, the call dist.irecv
makes, which the pp capture patch of dist.irecv does not reach).
Round 26: r22_16 (a tied embedding / head over 2 stages, the tied gradient summed by hand
over pp) with the first stage's receive posted as `dist.irecv` and its buffer read *before*
`work.wait()` (a race: for real the buffer holds what it held before until the message lands;
the last stage sleeps 1 s before sending, so it deterministically holds zeros). The composition
puts a receive's `copy_` where the receive is posted (`pp_merge`: the recv_ node), so the read
sees the sent gradient: the model sums the tied gradient, the real run adds zeros on stage 0."""

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 2
FACTOR = 1.0


class Tied(nn.Module):
    def __init__(self, v, h):
        super().__init__()
        self.emb = nn.Embedding(v, h)
        self.head = nn.Linear(h, v, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tok):
        return self.head(torch.tanh(self.emb(tok)))


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.emb = model.emb if stage == 0 else None
        self.head = model.head if stage == 1 else None

    def forward(self, h):
        if self.emb is not None:
            h = torch.tanh(self.emb(h))
        if self.head is not None:
            h = self.head(h)
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
        g = model.emb.weight.grad if stage.is_first else model.head.weight.grad
        other = torch.zeros_like(g)
        if stage.is_first:
            work = pg.recv([other], 1, 0)   # ProcessGroup.recv: what dist.irecv calls
            mine = g.clone()
            g.add_(other)                 # read before the receive is waited on
            work.wait()
            dist.send(mine, group=pg, group_dst=1)
        else:
            time.sleep(1.0)               # (the last stage is late: deterministic for real)
            dist.send(g.clone(), group=pg, group_dst=0)
            dist.recv(other, group=pg, group_src=0)
            g.add_(other)
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
