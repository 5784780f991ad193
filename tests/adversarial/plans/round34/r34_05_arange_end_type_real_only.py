"""Round 34, finding R34-1: ``arange``'s ``end`` is exempt as a shape size
(``real_literals.SHAPE_SIZE_ARGS``), but its python type sets the tensor's dtype. ``e =
float(n)`` at the probe sizes and ``n`` (an int) when the gradients are square at the real sizes
(``hidden == ffn == 6``): ``torch.arange(e)`` is a float tensor in the lowered trace and an int64
tensor in the run, so ``torch.full_like(pos, 0.5)`` is 0.5 in the trace (``_fill_value`` checks
the probe node's dtype) and 0 at the real sizes; ``g + w.amax() - 0.5`` is the gradient at the
probe sizes and the gradient minus 0.5 at the real sizes. The type check ``Traces.scalar`` makes
for a literal it reads (R14-1) is skipped by the exemption, and nothing compares twin nodes'
dtypes. Truth (torch4_truth, dp 2): step 1 w1 0.050 / w2 0.050, step 2 0.101 / 0.101. Prove at
26b88f4: EQUIVALENT (4 goals, 54 s). Control r34_06 (truth 2.8e-17): EQUIVALENT (65 s)."""

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
            n = g.shape[0]
            e = n if g.shape[0] == g.shape[1] else float(n)   # an int at the real sizes only
            pos = torch.arange(e)                  # float positions at the probe sizes, int64 at the real
            w = torch.full_like(pos, 0.5)          # 0.5, truncated to 0 in an int64 tensor
            b = g + w.amax() - 0.5
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
