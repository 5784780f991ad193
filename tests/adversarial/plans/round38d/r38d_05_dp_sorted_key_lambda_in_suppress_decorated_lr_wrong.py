"""Round 38d (dp 2, wrong): a `lambda` passed as `sorted(key=...)` raises (the raiser
`bytes(g.untyped_storage())`), and `sorted` itself is wrapped by a `ContextDecorator` +
`suppress(Exception)` (`_Quiet(Exception)(sorted)`): the `with` that swallows is contextlib's
(`ContextDecorator.__call__`'s inner), around a builtin; no function body of the train file is
on the way (the class `_Quiet` has no methods). Real run `n = 2.0`, capture 1.0.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (wip/r38 ba967a7): UNKNOWN (73 s; 41 s on a first run): the state check cannot read the
global `_Quiet` (`_abc_data`): sound, by luck (r38d_10 moves the class into `_n`).
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

class _Quiet(contextlib.ContextDecorator, contextlib.suppress):
    pass


def _n(g):
    box = [1.0]
    quiet_sorted = _Quiet(Exception)(sorted)   # WRONG: contextlib's wrapper swallows
    quiet_sorted([0], key=lambda i: box.__setitem__(
        0, 2.0 if len(bytes(g.untyped_storage())) else 1.0))
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
