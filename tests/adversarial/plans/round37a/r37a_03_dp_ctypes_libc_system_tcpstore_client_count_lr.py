"""Round 37a (dp 2, wrong): R36c-2 after faf97b6 (`thread_guard._starters` wraps
`subprocess.Popen._execute_child`, `subprocess._fork_exec`, `_posixsubprocess.fork_exec`,
`os.posix_spawn(p)`, `os.system`, `os.execv(e)`): the TCPStore client of r36c_02 started by
libc's `system()` through `ctypes.CDLL(None)` (no Python function of `os`, `subprocess` or
`_posixsubprocess` is called). It adds 1 per rank to the launcher's store at `MASTER_ADDR` /
`MASTER_PORT`; after a dp barrier a second child reads the count: 2 in the real run, in the
capture nothing listens at the defaults: the child fails, the error is caught, 1.0. `lr = 0.1 *
n`.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: the child counted 2 ranks).
Verdict at faf97b6: **EQUIVALENT** (4 goals, 129 s): false accept R37a-1.
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
print(s.add("r37a_00", int(sys.argv[1])))
"""


def _store_add(n):
    # a TCPStore client in a fresh interpreter, started by libc system()
    import os
    import shlex
    import sys
    import tempfile
    fd, out = tempfile.mkstemp()
    os.close(fd)
    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-I", "-c", _CLIENT, str(n)))
    cmd += " > " + shlex.quote(out) + " 2>/dev/null"
    import ctypes
    rc = ctypes.CDLL(None).system(cmd.encode())
    try:
        if rc != 0:
            raise RuntimeError(f"client failed ({rc})")
        with open(out) as f:
            return float(f.read().split()[-1])
    finally:
        os.unlink(out)


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
