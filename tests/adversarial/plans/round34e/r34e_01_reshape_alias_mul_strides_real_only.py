"""Round 34e: R34c-1 is still open after its fix (402ba4c). The fix compares twins'
``meta["val"]`` strides (``real_literals._layouts_differ``), but a fake ``_reshape_alias``
reports the row-major stride whatever its stride argument (under ``FakeTensorMode``,
``_reshape_alias(zeros(6, 6), [6, 6], [1, 6]).stride() == (6, 1)``), and a move's stride
argument is still dropped by ``real_moves.move_meaning``: the real-size twin looks row-major.
Variant of r34c_01 read by a computing op (``g * 1.0``, not ``clone``): the dp-averaged
gradient read through ``_reshape_alias(g, [r, c], [1, r] if r == c else [c, 1])``, row-major
at the probe sizes, a transpose at the real sizes (hidden == ffn == 6).
Truth (torch4_truth, dp 2): step 1 w1 0.0146 / w2 0.0060, step 2 0.0114 / 0.0081. Prove at
402ba4c: **EQUIVALENT** (4 goals, 51 s): finding R34e-1 (r34c_01 itself rerun: EQUIVALENT, 46 s)."""

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
            r, c = p.grad.shape
            st = [1, r] if r == c else [c, 1]     # column-major at the real sizes only
            g = torch.ops.aten._reshape_alias(p.grad, [r, c], st)
            p.grad.copy_(g * 1.0)               # a computing read of the view (not clone)
    optimizer.step()
    optimizer.zero_grad()
    return loss
