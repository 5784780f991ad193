"""Round 38e (dp 2, wrong): the raiser reached with no frame of the train file at all, so no
guard (lambda, function, with) is on the way: `stack.callback(box.extend, map(bytes,
map(torch.Tensor.untyped_storage, [g])))`. `ExitStack.close` calls `list.extend` (C), which
drives the maps (C); `bytes(meta storage)` raises NotImplementedError in the capture only and
`suppress(Exception)` below it swallows. Real run `box` grows, `n = 2.0`; capture `n = 1.0`.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (main 195d560): **EQUIVALENT** (4 goals, 20 s): false accept R38e-5.
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
    box = []
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.suppress(Exception))   # WRONG: swallows bytes()'s error
    stack.callback(box.extend, map(bytes, map(torch.Tensor.untyped_storage, [g])))
    stack.close()
    return 2.0 if box else 1.0


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
