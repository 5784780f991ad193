"""Round 38e (dp 2, wrong): r38d_01 with the callback `next` of a generator made by a
`lambda` whose body holds a `yield`. `caught`'s `visit_Lambda` skips such a lambda (its
body cannot move into an inner lambda), so nothing guards it. `stack.callback(next, gen)`
runs it in `ExitStack.close`; the raiser `bytes(g.untyped_storage())` (NotImplementedError
in the capture only) goes to `suppress.__exit__`. Real run `n = 2.0`, capture `n = 1.0`.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (main 195d560): **EQUIVALENT** (4 goals, 20 s): false accept R38e-1.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import contextlib

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

def _n(g):
    box = [1.0]
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.suppress(Exception))   # WRONG: swallows the lambda's error
    gen = (lambda: (yield box.__setitem__(0, 2.0 if len(bytes(g.untyped_storage())) else 1.0)))()
    stack.callback(next, gen)
    stack.close()
    return box[0]


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _n(model.w1.weight.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
