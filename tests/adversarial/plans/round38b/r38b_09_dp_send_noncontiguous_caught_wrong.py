"""Round 38b (dp 2, wrong): R37a-2's family past backend_rejects: point-to-point. Each rank
`dist.send`s a non-contiguous tensor (`g.new_zeros(6, 10).t()`, fresh: no goal reads it) to the
other. gloo raises "input tensor has to be contiguous" on both ranks (measured in a two-rank
gloo world, synchronously, before any peer waits); the fake backend does not, and `send` is not
among `backend_rejects`' ops. Caught: skip the gradient all-reduce in the real run only.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised on both ranks, caught;
no all-reduce).
Verdict (wip/r38 ac0f305): UNKNOWN (76 s): the peer (`1 - rank`) is a rank literal no rule reads
per rank (`c10d.send` argument 2): sound by accident, backend_rejects does not check `send` (not
in its op table).
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


def _agree(g, group):
    # WRONG: gloo sends only contiguous tensors; the fake backend sends anything
    try:
        peer = 1 - dist.get_rank(group)
        dist.send(g.new_zeros(g.shape[1], g.shape[0]).t(), group_dst=peer, group=group)
        return True
    except RuntimeError:
        return False


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        group = mesh["dp"].get_group()
        if _agree(model.w1.weight.grad, group):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=group)
                p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
