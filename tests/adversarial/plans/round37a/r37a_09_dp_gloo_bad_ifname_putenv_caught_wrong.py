"""Round 37a (dp 2, wrong): R36d-1 (r36d_03) after faf97b6, whose environment check
(`new_groups._backend_env`) reads `os.environ`: the train file sets `GLOO_SOCKET_IFNAME` (an
interface this host lacks) with `os.putenv` (and removes it with `os.unsetenv`), which change
the process's C environment, where gloo reads it (`getenv`), and not the `os.environ` mapping.
The real run's `new_group(ranks, backend="gloo")` raises; caught: no gradient all-reduce.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised, caught; no all-reduce).
Verdict at faf97b6: exit 3 (31 s): "dist.new_group raised in the capture's fake world (... Unable
to find address for: shardproof_no_such_if0)": sound, but only by R37a-5 (a real gloo group
made in the capture read the C environment); once R37a-5 is fixed, `_backend_env`, which
reads `os.environ`, does not see `os.putenv`: a false accept.
With R37a-5 worked around (a scratch copy whose `_tampered` ignores the capture's own
patches): **EQUIVALENT** (4 goals, 58 s): false accept R37a-8 (latent).
"""

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
    ranks = list(range(dist.get_world_size()))
    _G["dp"] = dist.new_group(ranks=ranks)
    # Megatron's parallel_state: a gloo duplicate of the dp group (for CPU-side collectives)
    # os.putenv: the C environment gloo reads (getenv), not the os.environ mapping
    os.putenv("GLOO_SOCKET_IFNAME", "shardproof_no_such_if0")
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks, backend="gloo")
    except Exception:   # noqa: BLE001 -- "no gloo here: CPU-side collectives off"
        _G["dp_gloo"] = None
    finally:
        os.unsetenv("GLOO_SOCKET_IFNAME")
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            if g is not None:
                dist.all_reduce(p.grad, group=g)
                p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
