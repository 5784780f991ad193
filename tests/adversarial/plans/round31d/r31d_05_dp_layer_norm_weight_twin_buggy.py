"""Round 31d (dp 2): layer_norm's weight combined with the normalised tensor by *name*
(rules_norm.LayerNorm: ``out * w.term``, no Lowering.fit). The spec normalises the square
parameter ``sq`` [h, h] over its last dim with the weight ``sq.detach().sum(1)`` (a vector whose dim
is the twin of sq's *first* dim); the plan (mesh given, wrong) multiplies each *row* by it:
``layer_norm(sq) * sq.sum(1, keepdim=True)`` (the weight detached in both: a gradient
through it meets the twin layout and is refused). Wrong: truth (torch4_truth.py FILE 2)
update sq 0.235, step 2 0.275. EQUIVALENT at 28aa88b (2 goals, 63 s)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6}


class M(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.sq = nn.Parameter(torch.randn(h, h) / h + torch.eye(h))

    def forward(self, x, plan):
        s = self.sq
        h = s.shape[-1]
        if plan:
            n = F.layer_norm(s, (h,)) * s.detach().sum(1, keepdim=True)   # wrong: the weight along rows
        else:
            n = F.layer_norm(s, (h,), s.detach().sum(1))  # right: along the normalised dim
        return x @ n


def build_model(s):
    return M(s["hidden"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"], mesh is not None) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        pg = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=pg)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
