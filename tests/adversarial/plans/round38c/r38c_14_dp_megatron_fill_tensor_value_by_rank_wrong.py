"""Round 38c (dp 2, wrong): r38_08's main_grad buffer filled, not zeroed, by `fill_` of a 0-dim
tensor (`aten.fill_.Tensor`) whose value differs by rank: `buf.fill_(x.sum() * 0.01)` of the
rank's shard of the batch. The real run adds the mean of the two ranks' fills to every gradient.
Truth (torch4_truth.py FILE 1): w1 0.0017, w2 0.0017.
Verdict (wip/r38 18debf8): UNKNOWN (55 s): `aten.fill_.Tensor` has no lowering rule: sound.
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
        # WRONG: fill_ with a 0-dim tensor whose value differs by rank (its shard of x)
        buf.fill_(x.sum() * 0.01)
        loss = 0.0
        for i, (xs, ys) in enumerate(((x, y), (x, y))):
            mb = ((model(xs) - ys) ** 2).mean() / 2
            mb.backward()
            for p, m in zip(ps, mains):
                m.add_(p.grad)
                p.grad = None
            loss = loss + mb.detach()
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        for p, m in zip(ps, mains):
            p.grad = m
    optimizer.step()
    optimizer.zero_grad()
    return loss
