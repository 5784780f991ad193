"""Round 10 adversarial train file: an `lru_cache`d function (filled at import) whose cached value the parallel step replaces (clear, refill while a global list holds 0.5, restore the list): the cache holds one entry on both sides, so `_Encoder` (which reads `__wrapped__` and `currsize` only) sees no change; the next forward reads 0.5 from the cache.
Wrong from step 2 on."""

import functools
import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_SRC = [1.0]


@functools.lru_cache(maxsize=None)
def _scale():
    return _SRC[0]


_scale()    # filled at import: the step leaves one entry, as it found it


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x))) * _scale()


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    if mesh is not None:
        _SRC[0] = 0.5
        _scale.cache_clear()
        _scale()
        _SRC[0] = 1.0
    return loss
