"""Round 36c (dp 2, wrong): R35d-6 (a store of the train file's own counts the ranks) after
round 36's `fake_answers` (the `TCPStore` / `FileStore` / `HashStore` constructors refused in
the train file's code): the `TCPStore` client is made in a child process
(`subprocess.run([sys.executable, "-I", "-c", ...])`), a fresh interpreter where no wrapper is
installed. It adds 1 per rank to the launcher's store at `MASTER_ADDR` / `MASTER_PORT`; after a
dp barrier a second child reads the count: 2 in the real run. In the capture the variables are
torchrun's defaults (127.0.0.1:29500) with no server behind them: the child fails, the
`CalledProcessError` is caught and the step takes 1.0. `lr = 0.1 * n`.
Truth (torch4_truth FILE 1): w1 0.0070, w2 0.0093.
prove --torch at 072d231: **EQUIVALENT** (4 goals, 84 s): a false accept (R36c-2).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d as c10d

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


_CLIENT = """
import os, sys
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                  timeout=timedelta(seconds=5))
print(s.add("r36c_02", int(sys.argv[1])))
"""


def _store_add(n):
    # a TCPStore client in a fresh interpreter: round 36's wrapped constructors are not there
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-I", "-c", _CLIENT, str(n)], capture_output=True,
                         text=True, timeout=60, check=True)
    return float(out.stdout.split()[-1])


def _ranks_by_item(mesh):
    # WRONG: the launcher's rendezvous server (MASTER_ADDR / MASTER_PORT, which the capture now
    # sets to torchrun's defaults, where no server listens) reached from a child process counts
    # the ranks: 2 in the real run; in the capture the child fails, caught: fallback 1
    try:
        _store_add(1)
        dist.barrier(group=mesh["dp"].get_group())
        return _store_add(0)
    except Exception:
        return 1.0


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _ranks_by_item(mesh)
    optimizer.step()
    optimizer.zero_grad()
    return loss
