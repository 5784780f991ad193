"""Round 41b (dp 2, wrong): a StreamHandler to sys.__stderr__ whose `lock` is the file's object
(acquire counts); `Handler.acquire` calls it. Real: counted; capture: skipped. lr = 0.1 * (1 +
count).
Truth (torch4_truth FILE 2): w1 0.014, w2 0.019 after step 1 (0.017 / 0.023 after step 2): the
lock is acquired twice per record (handle and flush), lr 0.3.
prove --torch at a323fd2: not run (round time); R41b-3 family by the code.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model

import logging
import sys

COUNT = [0]


class Lock:
    def acquire(self):
        COUNT[0] += 1

    def release(self):
        pass


log = logging.getLogger("r41b11")
log.propagate = False
log.setLevel(logging.INFO)
_h = logging.StreamHandler(sys.__stderr__)
_h.lock = Lock()
log.addHandler(_h)


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        COUNT[0] = 0
        log.info("grads reduced")
        optimizer.param_groups[0]["lr"] = 0.1 * (1 + COUNT[0])
    optimizer.step()
    optimizer.zero_grad()
    return loss
