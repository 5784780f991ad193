"""Round 42c: r42_05 with the infinite max_norm as a 0-d tensor
(``torch.tensor(float('inf'))``): it clips nothing, but ``logs_only`` only knows Python numbers,
so the logging call before the hand-written dp reduction is still the gradient goals' read point.
Truth (torch4_truth.py FILE 2): right (step 2: 5.6e-17 / 5.6e-17).
Verdict (main 959c97b): NOT EQUIVALENT (53 s; grad:w2.weight, also grad:w1.weight: the plan's
local gradients against the spec's; the parameters open, the inf constant not lowered): R42c-1.
"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
INF = torch.tensor(float("inf"), dtype=torch.float64)
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
    # the local gradient norm, logged before the reduction (inf: no clipping happens)
    local_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), INF)
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
