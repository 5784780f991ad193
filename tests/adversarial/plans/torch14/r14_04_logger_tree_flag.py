"""Round 14 adversarial train file: a first-step flag kept as an entry of logging's logger
tree (`logging.Logger.manager.loggerDict["r14_step_done"] = True`). `step_state` reads
logging's `Manager` without its caches (`_LOGGER_CACHES`: the tree fills as loggers are
used, false refusal F11-2) and `_logger_links` checks only that `loggerDict` is a dict, not
what it holds (the lead's round-13 fix did so for a logger's `_cache`). The parallel step
divides the all-reduced gradient by the world size only while the entry is absent.
Wrong from step 2 on. (The aot_autograd import loads, before the step, the torch modules
the traced step would import lazily: their finalizers otherwise make every file UNKNOWN, F11-1.)"""

import logging

import torch
import torch._functorch.aot_autograd  # noqa: F401 -- loaded before the step, as after a first step
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}



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
            done = logging.Logger.manager.loggerDict.get("r14_step_done", False)
            p.grad.div_(mesh["dp"].size() if not done else 1)
    optimizer.step()
    optimizer.zero_grad()
    logging.Logger.manager.loggerDict["r14_step_done"] = True
    return loss
