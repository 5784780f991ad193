"""Round 35d (dp 2, wrong): R35a-2 without the world's store: the step makes its own
`dist.TCPStore` client to `MASTER_ADDR` / `MASTER_PORT` (the launcher's rendezvous server), adds
1 per rank, barriers over dp and reads the count: 2 in the real run; in the capture (no server /
no MASTER_* variables) the error is caught and the step takes 1.0. `lr = 0.1 * n`.
Truth (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0164 / 0.0266 after step 2).
prove --torch at 2acd1b3: **EQUIVALENT** (4 goals, 30 s): a false accept (R35d-6).
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


def _ranks_by_item(mesh):
    # WRONG: the real rendezvous server reached by a TCPStore client of the step's own (the
    # launcher's MASTER_ADDR / MASTER_PORT); in the capture it cannot be reached: fallback 1
    import os
    from datetime import timedelta
    try:
        s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          is_master=False, timeout=timedelta(seconds=10))
        s.add("r35d_11", 1)
        dist.barrier(group=mesh["dp"].get_group())
        return float(s.add("r35d_11", 0))
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
