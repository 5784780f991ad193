"""Round 23 (R23-3's mechanism in one step, no buffer reuse): the "tied embedding" gradient sync
of a GPT-2 style pipeline written DDP-style, with a flat receive bucket whose per-parameter
views are made *before* the receive (`views = [flat[a:b].view_as(g)]`), run on a model whose
embedding and head are NOT tied (`TIE = False`: the config changed, the sync was not removed).
For real the sync adds the other stage's gradient of an unrelated weight (emb.grad into
head.grad and back): wrong. `pp_merge` composes the receive as "later readers of the buffer read
the value sent" (env[flat] := clone of the send); the views were made from the zero-filled
bucket before the receive, so in the composed program they still read zeros: the sync adds 0,
which is the single-device step."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 2
TIE = False


class LM(nn.Module):
    def __init__(self, v, h):
        super().__init__()
        self.emb = nn.Embedding(v, h)
        self.head = nn.Linear(h, v, bias=False)
        if TIE:
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
    return LM(s["vocab"], s["h"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], dtype=torch.long),
            "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def sync_tied(g, pg, first):
    """Sum the tied weight's gradient over the two stages through a flat bucket."""
    flat = torch.zeros(g.numel(), dtype=g.dtype)
    views = [flat[0:g.numel()].view_as(g)]          # the bucket's per-parameter views
    if first:
        dist.send(g.reshape(-1).clone(), group=pg, group_dst=1)
        dist.recv(flat, group=pg, group_src=1)
    else:
        dist.recv(flat, group=pg, group_src=0)
        dist.send(g.reshape(-1).clone(), group=pg, group_dst=0)
    for v in views:
        g.add_(v)


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
        sync_tied(g, pg, stage.is_first)
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
