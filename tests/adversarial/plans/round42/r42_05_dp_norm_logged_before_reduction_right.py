"""Round 42b's note (older than stop 42): ``clip_grad_norm_(params, inf)`` used only to log
the local gradient norm, before a hand-written dp all-reduce. It clips nothing, so the step is
right; but the gradient goals are read when the step first enters ``clip_grad_norm_``, which in
the plan is before the dp reduction.
Truth (torch4_truth.py FILE 2): right (5.6e-17 / 0; 5.6e-17 / 5.6e-17).
Verdict (main 16d9bd7): NOT EQUIVALENT (48 s; first divergence grad:w2.weight, also
grad:w1.weight: the plan's local gradients against the spec's): S42-2, a wrong NOT EQUIVALENT
older than stop 42 (the read point was there before). Since ``grad_snapshot.logs_only`` (a clip
with an infinite max_norm is no read point): UNKNOWN (57 s: the inf constant of torch's clip
has no lowering, every goal open).
"""

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
    # the local gradient norm, logged before the reduction (inf: no clipping happens)
    local_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
