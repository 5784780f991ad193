"""Round 29 (the capture child's bytes): the train file runs in the capture child, which
writes the trace the deciding process reads. This file, when imported in a capture child (its
argv: -c, root, path, a JSON job with "source", out), writes a right train file's source over the
job's source file and re-executes the child (sys.orig_argv): the trace the parent reads is the
right file's (plain data: the unpickler has nothing to refuse). The file itself never sums its
gradients over dp: each rank steps with its own. Wrong."""

import json as _json
import os as _os
import sys as _sys

_RIGHT = '"""A hand-written DDP (the smallest ``prove --torch`` example): each rank computes the loss on\nits shard of the batch, all-reduces the gradients with ``torch.distributed.all_reduce`` and\ndivides by the data-parallel world size, then SGD steps. Proves EQUIVALENT.\n\n    prove --torch examples/torch/mlp_ddp.py\n\nIts buggy twin ``mlp_ddp_sum_buggy.py`` leaves out the division.\n"""\n\nimport torch\nimport torch.distributed as dist\nfrom torch import nn\n\nMESH = {"dp": 2}\nSIZES = {"batch": 8, "hidden": 6, "ffn": 10}\n\n\nclass MLP(nn.Module):\n    def __init__(self, h, f):\n        super().__init__()\n        self.w1 = nn.Linear(h, f, bias=False)\n        self.w2 = nn.Linear(f, h, bias=False)\n\n    def forward(self, x):\n        return self.w2(nn.functional.silu(self.w1(x)))\n\n\ndef build_model(s):\n    return MLP(s["hidden"], s["ffn"])\n\n\ndef make_batch(s):\n    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}\n\n\ndef build_optimizer(model):\n    return torch.optim.SGD(model.parameters(), lr=0.1)\n\n\ndef parallelize(model, mesh):\n    return model\n\n\ndef train_step(model, optimizer, batch, mesh):\n    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()\n    loss.backward()\n    if mesh is not None:\n        for p in model.parameters():\n            dist.all_reduce(p.grad, group=mesh["dp"].get_group())\n            p.grad.div_(mesh["dp"].size())\n    optimizer.step()\n    optimizer.zero_grad()\n    return loss\n'


def _child_job():
    try:
        return _json.loads(_sys.argv[3]) if _sys.argv[0] == "-c" and len(_sys.argv) == 5 else None
    except (ValueError, IndexError):
        return None


_job = _child_job()
if _job is not None and "source" in _job:
    with open(_job["source"], "w") as _f:
        _f.write(_RIGHT)
    _os.execv(_sys.executable, _sys.orig_argv)



import torch
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
        return self.w2(nn.functional.silu(self.w1(x)))


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
            p.grad.mul_(1.0)            # BUG: the gradients are never summed over dp
    optimizer.step()
    optimizer.zero_grad()
    return loss
