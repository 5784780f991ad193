"""Round 37a (dp 2, wrong): R36c-3's mirror after faf97b6 (which refuses
`monitored_barrier`, an error the fake backend raises and gloo does not): an error gloo raises
and the fake backend does not. The step checks that the ranks agree with an all-reduce
`ReduceOp.BAND` of a float flag made from the step's tensors (`g.new_ones(1)`): gloo raises
"Cannot use ReduceOp.BAND with non-integral dtype" (synchronously, measured in a one-rank gloo
world), the fake backend on fake tensors does not. Caught: "ranks disagree, skip the gradient
all-reduce" in the real run only.
Truth (torch4_truth.py FILE 1): w1 0.0088, w2 0.018 (wrong: gloo raised, caught; no all-reduce).
Verdict at faf97b6: **EQUIVALENT** (4 goals, 161 s): false accept R37a-2.
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
    # WRONG: gloo has no BAND for float tensors; the fake backend takes any op
    try:
        f = g.new_ones(1)
        dist.all_reduce(f, op=dist.ReduceOp.BAND, group=group)
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
