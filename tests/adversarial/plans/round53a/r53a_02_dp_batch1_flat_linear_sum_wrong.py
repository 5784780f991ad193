"""Round 53a (dp 2, WRONG): hand-written DDP where each rank's local batch is ONE row (batch 2
over dp 2) and the plan flattens it, ``x.view(-1)``, before the linear: the local row's dims
are [batch-block (size 1), hidden], and the contraction with the weight's ``hidden`` splits the
spec dim ``hidden`` into ``(1, hidden)`` (``dims._refine``: a DimsError since c13cbd0, a Refine
loop refused at line 1 before). Wrong: the gradients are all-reduced but not divided by dp
(twice the mean's gradient); else r53a_01."""
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"hidden": 6}   # the batch is 2, a literal: never probed


def build_model(s):
    return nn.Linear(s["hidden"], s["hidden"], bias=False)


def make_batch(s):
    return {"x": torch.zeros(2, s["hidden"]), "y": torch.zeros(2, s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    if mesh is not None:
        x, y = x.view(-1), y.view(-1)          # the rank's one row as a vector
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.mul_(1.0)   # wrong: the sum, not the mean
    optimizer.step()
    optimizer.zero_grad()
    return loss
