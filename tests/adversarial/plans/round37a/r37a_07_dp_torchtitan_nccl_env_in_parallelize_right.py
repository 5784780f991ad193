"""Round 37a (dp 2, right): a false-refusal check of faf97b6's environment check
(`new_groups._raises_in_real_run`: any `GLOO_*` / `NCCL_*` / `TORCH_NCCL_*` / ... variable
changed since the launch refuses a `new_group`): torchtitan's `init_distributed` sets
`TORCH_NCCL_ASYNC_ERROR_HANDLING` and `TORCH_NCCL_TRACE_BUFFER_SIZE` (`setdefault`) before its
groups are made; here in `parallelize`, before a `new_group` of the dp ranks (hand-written DDP
over it). Neither variable makes a gloo (or an nccl) group's construction fail.
Truth (torch4_truth.py FILE 1): w1 5.6e-17, w2 0.0 (right).
Verdict at faf97b6: **exit 3** (48 s), line 51: "dist.new_group with the environment its backend
reads changed since the launch (TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCH_NCCL_TRACE_BUFFER_SIZE);
refused even if the error is caught": false refusal R37a-4 (minor: variables of another
backend, which make no group fail).
"""

import datetime
import os

import torch
import torch.distributed as dist
from torch import nn

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
    # torchtitan's init_distributed sets the NCCL flight recorder and error handling before its
    # groups are made (harmless on gloo, and on nccl they make no group fail)
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
    os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "0")
    ranks = list(range(dist.get_world_size()))
    _G["dp"] = dist.new_group(ranks=ranks)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
