"""Round 34c: R26-2 (``_reshape_alias``'s strides) at the real sizes only. The probe-size rule
(``rules_layout.ReshapeAlias``) requires row-major strides, but ``_reshape_alias`` is data
movement: ``real_moves.move_meaning`` gives ``("reshape",)`` for it whatever its stride
argument, and ``real_literals.unread_real_literals`` walks computing nodes only. The dp-averaged
gradient is read back through ``_reshape_alias(g, [r, c], [1, r] if r == c else [c, 1])``:
row-major at the probe sizes (non-square gradients), column-major (a transpose) at the real
sizes (hidden == ffn == 6).
Truth (torch4_truth, dp 2): step 1 w1 0.0146 / w2 0.0060, step 2 0.0114 / 0.0081. Prove at
ae5084f: **EQUIVALENT** (4 goals, 65 s): finding R34c-1. Control r34c_02 (truth 2.8e-17):
EQUIVALENT (63 s)."""

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
            p.grad.copy_(g.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
