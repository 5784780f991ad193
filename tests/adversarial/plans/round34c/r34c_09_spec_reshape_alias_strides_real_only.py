"""Round 34c: R34c-1 in the single-device spec (user code, traced at both sizes too): the
spec reads its gradients back through ``_reshape_alias(g, [r, c], [1, r] if r == c else
[c, 1])`` (a transpose at the real sizes only), the plan is a right hand-written DDP.
Truth (torch4_truth, dp 2): step 1 w1 0.0146 / w2 0.0060, step 2 0.0114 / 0.0081. Prove at
ae5084f: **EQUIVALENT** (4 goals, 60 s): finding R34c-1 on the spec side. Control: r34c_02."""

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
    else:                   # the single-device spec only
        for p in model.parameters():
            r, c = p.grad.shape
            st = [1, r] if r == c else [c, 1]     # column-major at the real sizes only
            g = torch.ops.aten._reshape_alias(p.grad, [r, c], st)
            p.grad.copy_(g.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
