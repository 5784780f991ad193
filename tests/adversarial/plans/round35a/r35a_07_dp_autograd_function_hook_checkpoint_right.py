"""Round 35a (dp 2, right): false-refusal probe for the thread guard: autograd work the engine
could run elsewhere: a custom `autograd.Function` (silu by hand), a tensor hook on the hidden
activation's gradient (`register_hook`, halving then doubling), and `torch.utils.checkpoint`
(non-reentrant) around the first layer; hand-written DDP (one all-reduce of every gradient).
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 6.9e-18, w2 4.3e-19.
prove --torch at ff7d7f1: EQUIVALENT (4 goals, 62 s): right (backward's hooks and Function run on
the tracing thread; one_thread refuses nothing).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class Silu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * (s + x * s * (1 - s))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        a = checkpoint(self.w1, x, use_reentrant=False)
        if a.requires_grad:
            a.register_hook(lambda g: (g * 0.5) * 2.0)
        return self.w2(Silu.apply(a))


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
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
