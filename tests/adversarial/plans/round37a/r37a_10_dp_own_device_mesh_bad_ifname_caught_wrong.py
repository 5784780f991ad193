"""Round 37a (dp 2, wrong): R36d-1 through `init_device_mesh` in the train file. faf97b6's
checks (`_raises_in_real_run`: the backend's environment changed since the launch) are in
`new_groups._new_group`, the wrapper of `dist.new_group` / `c10d.new_group`; torch's
`device_mesh` module imported `new_group` by name when `torch.distributed` was imported, before
the wrapper, so the groups of a mesh the train file makes are made by torch's `new_group`
unchecked. With `GLOO_SOCKET_IFNAME` set to an interface this host lacks, the real run's
`init_device_mesh("cpu", (2, 1))` raises (gloo makes the size-1 groups of dim "s"); caught:
no gradient all-reduce. The fake world's groups read no environment.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: init_device_mesh raised, caught; no
all-reduce).
Verdict at faf97b6: **EQUIVALENT** (4 goals, 78 s): false accept R37a-9.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


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
    # a (2, 1) mesh of this file's own to check the network (torch's init_device_mesh makes
    # its groups with the new_group device_mesh imported, not dist.new_group); "no network for
    # gloo here: go without the gradient all-reduce"
    os.environ["GLOO_SOCKET_IFNAME"] = "shardproof_no_such_if0"
    try:
        init_device_mesh("cpu", (dist.get_world_size(), 1), mesh_dim_names=("r", "s"))
        _G["ok"] = True
    except Exception:   # noqa: BLE001
        _G["ok"] = False
    finally:
        os.environ.pop("GLOO_SOCKET_IFNAME", None)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None and _G["ok"]:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
