"""Round 36d (dp 2, wrong): R36d-2 without
backend=: a plain new_group(ranks) (round 35c's accepted route, no backend named) while
ProcessGroupGloo.__init__ is replaced by one that makes this rank alone. The real world's
backend is gloo (the truth; ProcessGroupNCCL on a GPU cluster is the same class of attribute),
so torch's _new_process_group_helper constructs the group's backend through the replaced
constructor: the group's all_reduce is the identity. The capture's world is fake: the
constructor is never called, and nothing compares the backend classes' attributes.

Truth (torch4_truth.py FILE 1, gloo): w1 0.0067, w2 0.010 (wrong: a no-op group).
Verdict at 072d231: EQUIVALENT (64 s, loaded): false accept R36d-3.
"""

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d
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
    gloo = c10d.ProcessGroupGloo
    torch_init = gloo.__init__

    def solo(self, store, rank, size, *args, **kwargs):
        torch_init(self, c10d.PrefixStore(f"solo{dist.get_rank()}/", store), 0, 1, *args,
                   **kwargs)

    gloo.__init__ = solo
    try:
        _G["dp_gloo"] = dist.new_group(ranks=ranks)
    finally:
        gloo.__init__ = torch_init
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        g = _G["dp_gloo"]
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
            p.grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
