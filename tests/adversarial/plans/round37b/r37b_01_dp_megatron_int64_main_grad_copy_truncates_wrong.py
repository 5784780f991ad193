"""Round 37b (dp 2, wrong): Megatron's `main_grad` buffer (R36b-3's rule: a 1-d `torch.zeros(n)`
cut by its own slices is a bucket of zeros, `copy_` through one piece replaces it) made with
`dtype=torch.int64`: `main_grad.copy_(10 * p.grad)` truncates every gradient to a multiple of
0.1 toward zero, all-reduced, then `p.grad = main_grad.to(p.dtype) / (10 * ws)`. Over the reals
the copy is the identity; the truncation is a conversion to an integer type of a computed value.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0046 (wrong: the gradients truncated).
Verdict (wip/r37 d782147): UNKNOWN (63 s): `copy_` "a copy from torch.float32 into a
torch.int64 tensor (a cast)" not lowered: sound.
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
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        ws = mesh["dp"].size()
        ps = [model.w1.weight, model.w2.weight]
        n = sum(p.numel() for p in ps)
        # WRONG: an integer buffer: the copy into it truncates the gradients
        buf = torch.zeros(n, dtype=torch.int64, device=ps[0].device)
        mains, a = [], 0
        for p in ps:
            mains.append(buf[a:a + p.numel()].view_as(p))
            a += p.numel()
        for p, m in zip(ps, mains):
            m.copy_(10 * p.grad)
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        for p, m in zip(ps, mains):
            p.grad = m.to(p.dtype) / (10 * ws)
    optimizer.step()
    optimizer.zero_grad()
    return loss
