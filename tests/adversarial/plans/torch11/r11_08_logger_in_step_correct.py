"""Round 11 false-refusal probe (a CORRECT train file): hand-written DDP (`mlp_ddp.py`) that
logs from `train_step` through a module-level `logging.getLogger(__name__)`, as training code
does. `Logger.debug` fills the logger's level cache (`Logger._cache`); nothing the step computes
depends on it. The parallel step trains exactly as the single device."""

import logging

import torch
import torch._functorch.aot_autograd  # noqa: F401 -- loaded before the step (F11-1)
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
log = logging.getLogger(__name__)


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x))) * 1.0


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
    log.debug("step done")
    return loss
