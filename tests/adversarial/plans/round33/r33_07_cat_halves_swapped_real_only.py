"""Round 33, attempt a7: R33-1 through a ``cat``: each gradient's two ``chunk(2, 0)`` halves
put back in order at the probe sizes, swapped at the real sizes (square gradients); the twin
``cat`` nodes mean the same and ``_sources`` is a set. Truth (torch4_truth, dp 2): step 1 w1
0.0122 / w2 0.0082, step 2 0.0094 / 0.0088. Prove at a48d781: exit 3 (79 s), "traced data:
nodes: node 65: dim ?10 is not a dim of the binding": ``cat`` of a split's pieces in order is
not lowered as the identity here, so the swap is never reached (control r33_08 not proved)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            g = p.grad
            lo, hi = g.chunk(2, 0)
            if g.shape[0] == g.shape[1]:    # square at the real sizes only
                b = torch.cat([hi, lo], 0)  # the same moves as below, pieces in another order
            else:
                b = torch.cat([lo, hi], 0)
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
