"""Round 34, attempt a9: the ``Opaque`` exemption of ``unread_real_literals`` with a node whose
dtype matters: ``buf = torch.empty(s.shape, dtype=dt)`` (no rule: uninitialised, ``Opaque``),
``dt`` int64 when the gradients are square at the real sizes and ``s.dtype`` at the probe sizes,
then ``buf.copy_(s)`` (overwritten whole: ``copy_`` does not read the old value) of the row
sums, truncated toward 0 in the int64 run; ``g + (buf - s).unsqueeze(1)``. Truth (torch4_truth,
dp 2): step 1 w1 0.0158 / w2 0.0111, step 2 0.0140 / 0.0129. Prove at 26b88f4: UNKNOWN (49 s),
"argument dtype of empty (aten.empty.memory_format) is torch.float32 at the probe sizes and
torch.int64 at the real sizes": sound (the whole ``copy_`` wrote ``empty``'s node a value, so
it is no longer ``Opaque`` when the literals are compared). Control r34_10: EQUIVALENT (55 s)."""

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
            s = g.sum(1)
            dt = torch.long if g.shape[0] == g.shape[1] else s.dtype   # int64 at the real sizes only
            buf = torch.empty(s.shape, dtype=dt, device=g.device)      # no rule: Opaque
            buf.copy_(s)                     # overwritten whole; truncated toward 0 in int64
            b = g + (buf - s).unsqueeze(1)
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
