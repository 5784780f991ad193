"""Round 38 (dp 2, wrong): r37b_10 (Megatron's main_grad buffer, the whole local batch
twice with halved losses, all-reduce and div_ of the buffer) with, after the
accumulation, `buf.view(-1)[n1 - 3:n1 + 3].zero_()`: a slice of a whole view of the buffer that
straddles w1's and w2's pieces (3 entries of each lost).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    if mesh is None:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
    else:
        ps = [model.w1.weight, model.w2.weight]
        n = sum(p.numel() for p in ps)
        buf = torch.zeros(n, dtype=ps[0].dtype, device=ps[0].device)
        mains, a = [], 0
        for p in ps:
            mains.append(buf[a:a + p.numel()].view_as(p))
            a += p.numel()
        buf.zero_()
        loss = 0.0
        for xs, ys in ((x, y), (x, y)):
            mb = ((model(xs) - ys) ** 2).mean() / 2
            mb.backward()
            for p, m in zip(ps, mains):
                m.add_(p.grad)
                p.grad = None
            loss = loss + mb.detach()
        n1 = ps[0].numel()
        buf.view(-1)[n1 - 3:n1 + 3].zero_()     # WRONG: across the boundary
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        for p, m in zip(ps, mains):
            p.grad = m
    optimizer.step()
    optimizer.zero_grad()
    return loss
