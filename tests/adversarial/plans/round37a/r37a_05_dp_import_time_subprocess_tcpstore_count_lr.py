"""Round 37a (dp 2, wrong): R36c-2 when the train file is imported. faf97b6 refuses a program
started while the capture runs the train file's functions (`thread_guard.threads_refused`); the
import is not in that window (`fake_answers.importing` records stores and collectives, not
processes). At import, `subprocess.run` starts a TCPStore client in a fresh interpreter that
adds 1 to the launcher's store (`MASTER_ADDR` / `MASTER_PORT`, up before the import in the real
run: torchrun's agent store; the truth's rank 0 server) and waits for `WORLD_SIZE` ranks: 2. In
the capture nothing listens at the defaults: the child fails, caught: 1. `lr = 0.1 * _N`.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: the child counted 2 ranks).
Verdict at faf97b6: **EQUIVALENT** (4 goals, 204 s): false accept R37a-3.
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
import os, sys, time
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                  timeout=timedelta(seconds=5))
n = s.add("r37a_05", 1)
for _ in range(100):
    n = s.add("r37a_05", 0)
    if n >= int(os.environ["WORLD_SIZE"]):
        break
    time.sleep(0.1)
print(n)
"""


def _count_ranks():
    # WRONG: when the file is imported, a TCPStore client in a child interpreter counts the
    # ranks at the launcher's store: 2 in the real run (the store is up before the import); in
    # the capture nothing listens at the defaults: the child fails, caught: 1
    import subprocess
    import sys
    try:
        out = subprocess.run([sys.executable, "-I", "-c", _CLIENT], capture_output=True,
                             text=True, timeout=60, check=True)
        return float(out.stdout.split()[-1])
    except Exception:
        return 1.0


_N = _count_ranks()


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _N
    optimizer.step()
    optimizer.zero_grad()
    return loss
