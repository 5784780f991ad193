"""Round 38e (dp 2, right): the commonest lambda of a training file, a warmup
`LambdaLR(opt, lambda step: min(1.0, (step + 1) / 10))` made in `build_optimizer` and stepped
after `optimizer.step()`. Nothing raises; the question is whether the guarded lambda or the
scheduler's patching of `optimizer.step` (it sets `optimizer._opt_called`) is refused.
Truth (torch4_truth.py FILE 1): w1 0, w2 3e-17 (right).
Verdict (main 195d560): UNKNOWN (18 s), "step-state: both steps change optimizer._opt_called": the
known F11-3 (kept by design); the guarded lambda itself is not refused.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Base(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


class MLP(Base):
    pass


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 10))
    return opt


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.sched.step()
    optimizer.zero_grad()
    return loss
