"""Round 41b (dp 2, wrong): a `FileHandler` (delay=True) whose `stream` the file set to its own
object; `_plain` checks the stream only of an exact StreamHandler. Real: `emit` writes to the
object (a counter); capture: skipped. lr = 0.1 * (1 + count).
Truth (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2):
the file's stream counts the record.
prove --torch at a323fd2: **EQUIVALENT** (4 goals, 173 s): a false accept (R41b-3).
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
import os
import tempfile

COUNT = [0]


class Sink:
    def write(self, s):
        COUNT[0] += 1

    def flush(self):
        pass


log = logging.getLogger("r41b05")
log.propagate = False
log.setLevel(logging.INFO)
_fh = logging.FileHandler(os.path.join(tempfile.gettempdir(), "r41b05.log"), delay=True)
_fh.stream = Sink()
log.addHandler(_fh)


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
