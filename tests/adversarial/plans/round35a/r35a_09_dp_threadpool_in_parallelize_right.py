"""Round 35a (dp 2, right): false-refusal probe: `parallelize` uses a `ThreadPoolExecutor(2)` for
pure-Python work (it computes the parameter names' lengths; no torch work in the pool, every
thread joined before it returns); the step is hand-written DDP.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0, w2 2.8e-17 (both steps).
prove --torch at ff7d7f1: exit 3 at the `ex.map` line (42 when run, before this docstring grew; "(threading.Thread.start) while the
capture runs the train file's code", ~15 s): a false refusal (R35a-4, minor: `threads_let`
covers build_model / make_batch, not parallelize).
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
    import concurrent.futures
    names = [n for n, _ in model.named_parameters()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:   # right: no torch work
        lens = list(ex.map(len, names))
    assert lens == [len(n) for n in names]
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
