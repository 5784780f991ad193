"""Round 34d (dp 2, wrong): R34d-2: no reference taken at import at all. The second all-reduce
of every gradient runs in a thread made by libc's `pthread_create` through ctypes (a
`CFUNCTYPE` callback as the start routine), joined with `pthread_join`: none of the wrapped
starters is called, and ctypes gives the foreign thread a Python thread state only while the
callback runs (deleted when it returns), so after the join the thread set is what it was.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1
(0.0086 / 0.012 after step 2).
prove --torch at 0795de7: **EQUIVALENT** (4 goals by rewriting, 69 s): a false accept.
Control: r34d_05 (EQUIVALENT, 60 s)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import ctypes

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
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        def again(*_):
            for p in model.parameters():
                dist.all_reduce(p.grad, group=mesh["dp"].get_group())   # WRONG: summed twice
        libc = ctypes.CDLL(None)
        fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda _a: again() or 0)
        tid = ctypes.c_ulong()
        libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_void_p]
        assert libc.pthread_create(ctypes.byref(tid), None, ctypes.cast(fn, ctypes.c_void_p),
                                   None) == 0
        libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        libc.pthread_join(tid, None)
    optimizer.step()
    optimizer.zero_grad()
    return loss
