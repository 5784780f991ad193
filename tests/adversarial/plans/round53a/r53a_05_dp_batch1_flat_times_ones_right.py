"""Round 53a (dp 2, right): r53a_01's one-row local batch, flattened, times an in-step
``torch.ones(hidden)`` (an atom with no lineage, which the flat row's [batch-block (size 1),
hidden] splits into (1, hidden)); then a parameter ``b`` of [hidden] times the same ones: the
lineage-free (1, hidden) parts meet the spec dim ``hidden`` (``Dims._distribute``). At
8a29920 a Refine (the spec's hidden split into (1, hidden)); since c13cbd0 a DimsError."""
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"hidden": 6}   # the batch is 2, a literal: never probed


class M(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w = nn.Linear(h, h, bias=False)
        self.b = nn.Parameter(torch.zeros(h))


def build_model(s):
    return M(s["hidden"])


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
    m = torch.ones(x.shape[-1], device=x.device)
    z = x * m
    loss = ((model.w(z) - y) ** 2).mean() + (model.b * m).sum() ** 2
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
