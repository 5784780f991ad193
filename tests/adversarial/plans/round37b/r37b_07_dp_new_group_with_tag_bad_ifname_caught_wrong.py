"""Round 37b (dp 2, wrong): R36d-1 / R37a-9 through `distributed_c10d._new_group_with_tag`,
the function `new_group` calls: dfda418 checks `dist.new_group` (`new_groups._new_group`) and
`device_mesh`'s `new_group` / `split_group`, not this one. With `GLOO_SOCKET_IFNAME` set to an
interface this host lacks, the real run's `_new_group_with_tag(backend="gloo")` raises; caught:
no gradient all-reduce. The fake world's group reads no environment.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: the group raised, caught; no
all-reduce).
Verdict (wip/r37 d782147): NOT EQUIVALENT (4 goals refuted, 68 s): the capture took the
fallback too (the direct call raised in the fake world as well): sound here, but only by
accident; dfda418's checks are not what stopped it.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d

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
    # a gloo group made with new_group's own helper to check the network: "no network for
    # gloo here: go without the gradient all-reduce"
    os.environ["GLOO_SOCKET_IFNAME"] = "shardproof_no_such_if0"
    try:
        c10d._new_group_with_tag(list(range(dist.get_world_size())), backend="gloo")
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
