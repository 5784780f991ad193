"""Round 34e, false-refusal probe of 402ba4c's layout check (``real_literals._layouts_differ``):
a right dp plan where torch may lay tensors out otherwise at the real sizes: batch per rank 1
(batch 2 over dp 2), square weights (hidden == ffn == 6), an ``expand`` of a size-1 dim and a
``t()`` read. Gradients all-reduced and averaged over dp.
Truth (torch4_truth, dp 2): 5.6e-17. Prove at 402ba4c: exit 3 (30 s), "the graph at real sizes
has 58 nodes, the main trace 59" (the size alignment, not the layout check): a false refusal
not made a test."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 2, "hidden": 6, "ffn": 6}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)
        self.scale = nn.Parameter(torch.ones(1, h))

    def forward(self, x):
        s = self.scale.expand(x.shape[0], -1)
        h = nn.functional.silu(self.w1(x * s))
        return h @ self.w2.weight.t()


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
    optimizer.step()
    optimizer.zero_grad()
    return loss
