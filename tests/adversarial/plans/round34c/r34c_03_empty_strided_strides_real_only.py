"""Round 34c: the exempt strides of ``empty_strided`` (``real_literals.SHAPE_SIZE_ARGS``: "an
empty tensor's strides are its shape's row-major ones") reach a view that reads storage.
The averaged gradient is copied into ``torch.empty_strided((r, c), (1, r) if r == c else
(c, 1))`` (column-major storage at the real sizes only, hidden == ffn == 6) and read back
through ``_reshape_alias(t, [r, c], [c, 1])`` whose literals are the same at both sizes.
``ReshapeAlias`` checks ``src.is_contiguous()`` on the probe trace only.
Truth (torch4_truth, dp 2): step 1 w1 0.0146 / w2 0.0060, step 2 0.0114 / 0.0081 (r34c_01's
transpose). Prove at ae5084f: **EQUIVALENT** (4 goals, 58 s): finding R34c-2. Control: r34c_02
(the same read of a row-major tensor)."""

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
            st = (1, r) if r == c else (c, 1)     # column-major storage at the real sizes only
            t = torch.empty_strided((r, c), st, dtype=p.grad.dtype, device=p.grad.device)
            t.copy_(p.grad)                       # t holds the gradient (logically)
            g = torch.ops.aten._reshape_alias(t, [r, c], [c, 1])   # row-major strides: the
            p.grad.copy_(g.clone())               # storage read in another order if t is not
    optimizer.step()
    optimizer.zero_grad()
    return loss
