"""Round 34, finding R34-1 (second sink): ``torch.arange(0, e, device=g.device)``
(``arange.start``; the start 0 is compared, the end exempt) with ``e`` a float at the probe sizes
and an int at the real sizes; ``pos.copy_(g.sum(1))`` copies the gradient's row sums into it,
exactly in the float trace (the ``copy_`` rule's cast check reads the probe dtypes) and truncated
toward 0 in the int64 tensor of the real run; ``g + (pos - s).unsqueeze(1)`` is the gradient at
the probe sizes and the gradient minus its row sums' fractional parts at the real sizes. Truth
(torch4_truth, dp 2): step 1 w1 0.0158 / w2 0.0111, step 2 0.0140 / 0.0129. Prove at 26b88f4:
EQUIVALENT (4 goals, 47 s). (First draft without ``device=``: exit 3, the capture's
FakeTensorDeviceMismatchError, a cpu arange copied from a meta tensor.)"""

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
            pos = torch.arange(0, e, device=g.device)             # arange.start: float at the probe sizes, int64 at the real
            s = g.sum(1)
            pos.copy_(s)                           # the row sums, truncated toward 0 in an int64 tensor
            b = g + (pos - s).unsqueeze(1)
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
