"""Round 37b (dp 2, wrong): R37a-1's TCPStore client (r37a_03) started by a raw `clone` syscall
through `ctypes` with `CLONE_PARENT`: the child is the *parent's* child, not this process's, so
`thread_guard.children_now` (this process's reaped-children counters in `/proc/self/stat`, its
unreaped children in `/proc/self/task/*/children`) sees nothing change. The child execs
`/bin/sh` with libc's `execv` (no wrapped `os` function); the parent polls for its output file.
It adds 1 per rank to the launcher's store; after a dp barrier a second child reads the count: 2
in the real run; in the capture nothing listens: the child fails, caught, 1.0. `lr = 0.1 * n`.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: the sibling counted 2 ranks).
Verdict (wip/r37 d782147): **EQUIVALENT** (4 goals, 119 s): false accept R37b-1.
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


_CLIENT = """
import os, sys
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                  timeout=timedelta(seconds=5))
print(s.add("r37b_02", int(sys.argv[1])))
"""


def _store_add(n):
    # a TCPStore client in a fresh interpreter, a sibling of this process (CLONE_PARENT)
    import ctypes
    import os
    import shlex
    import sys
    import tempfile
    import time
    d = tempfile.mkdtemp()
    out = os.path.join(d, "out")
    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-I", "-c", _CLIENT, str(n)))
    cmd += f" > {shlex.quote(out)}.tmp 2>/dev/null; echo rc=$? >> {shlex.quote(out)}.tmp; "
    cmd += f"mv {shlex.quote(out)}.tmp {shlex.quote(out)}"
    libc = ctypes.CDLL(None)
    pid = libc.syscall(56, 0x00008000 | 17, 0, 0, 0, 0)     # clone(CLONE_PARENT | SIGCHLD)
    if pid == 0:
        argv = (ctypes.c_char_p * 4)(b"/bin/sh", b"-c", cmd.encode(), None)
        libc.execv(b"/bin/sh", argv)
        libc._exit(1)
    if pid < 0:
        raise RuntimeError("clone failed")
    for _ in range(400):
        if os.path.exists(out):
            break
        time.sleep(0.05)
    with open(out) as f:
        words = f.read().split()
    if words[-1] != "rc=0":
        raise RuntimeError("client failed")
    return float(words[-2])


def _ranks_by_item(mesh):
    # WRONG: the launcher's rendezvous server reached from a sibling process counts the ranks:
    # 2 in the real run; in the capture the client fails, caught: fallback 1
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
