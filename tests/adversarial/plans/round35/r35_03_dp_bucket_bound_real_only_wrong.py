"""Round 35 (dp 2, wrong): a flat bucket whose first slice is one entry late at the real sizes
only (the offset branches on the real hidden size, 6): at the probe sizes every slice is exactly
its piece; at the real sizes w1 gets entries [1, 37) of the buffer (a shifted gradient). The
slice has the same length at both sizes and its bounds are no equal block at either, so only
the buckets' real-size bound check sees it.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1.weight 0.016 after step 1. prove --torch:
UNKNOWN (56 s): w1's goals, "a slice of a flat bucket that is piece 0 at the probe sizes but
takes entries [1, 37] of pieces of [36, 36, 6] entries at the real sizes"; before buckets.py's
real-size bound check nothing compared these bounds at the real sizes (real_moves' `_slice_block`
sees no equal block at either size)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"])


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
        ps = [model.w1.weight, model.w2.weight, model.w2.bias]
        flat = torch.cat([p.grad.view(-1) for p in ps])
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
        shift = 1 if ps[0].shape[0] == 6 else 0
        a = 0
        for p in ps:
            b = a + p.numel()
            lo = a + shift if p is ps[0] else a
            p.grad.copy_(flat[lo:lo + p.numel()].view_as(p))
            a = b
    optimizer.step()
    optimizer.zero_grad()
    return loss
