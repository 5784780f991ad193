"""Round 42c: r42_05 with ``error_if_nonfinite=True`` on the
logging call: an infinite max_norm, so ``logs_only`` says no read point; the check of the norm
is a branch on a tensor value.
Truth (torch4_truth.py FILE 2): right (step 2: 5.6e-17 / 5.6e-17).
Verdict (main 959c97b): refused, exit 3 (12 s; GuardOnDataDependentSymNode: the check of the
norm reads a tensor value). Sound (a false refusal of torch's own check, older).
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
    local_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"),
                                                error_if_nonfinite=True)
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
