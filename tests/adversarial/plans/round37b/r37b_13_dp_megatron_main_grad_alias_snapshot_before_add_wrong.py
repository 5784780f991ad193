"""Round 37b (dp 2, wrong): Megatron's `main_grad` buffer; a "snapshot" of w1's piece taken
before the accumulation is a view (`buf[0:n1].view_as(w1)`, a second slice of the same range),
not a copy; after `main_grad.add_(p.grad)`, the all-reduce and `div_`, w1's gradient is
`main_grad - snapshot`: 0 in the real run (the snapshot sees the write). A reader that kept the
value from before the write (zeros) would give the right gradient.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0 (wrong: w1's gradient 0).
Verdict (wip/r37 d782147): NOT EQUIVALENT (49 s): the earlier slice reads the written piece
(`piece_read`): sound.
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
        ps = [model.w1.weight, model.w2.weight]
        n = sum(p.numel() for p in ps)
        buf = torch.zeros(n, dtype=ps[0].dtype, device=ps[0].device)
        n1 = ps[0].numel()
        snap = buf[0:n1].view_as(ps[0])     # WRONG: an alias, not a copy
        mains, a = [], 0
        for p in ps:
            mains.append(buf[a:a + p.numel()].view_as(p))
            a += p.numel()
        for p, m in zip(ps, mains):
            m.add_(p.grad)
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        ps[0].grad = mains[0] - snap
        ps[1].grad = mains[1]
    optimizer.step()
    optimizer.zero_grad()
    return loss
