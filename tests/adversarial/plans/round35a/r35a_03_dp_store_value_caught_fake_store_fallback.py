"""Round 35a (dp 2, wrong): R35a-2 (no thread). The step reads a number through the default
process group's *store* (`distributed_c10d._get_default_store()`): each rank sets a key, then sums
every rank's key (`store.get` waits for it): 2 in the real run (TCPStore). In the capture the
world's store is torch's `FakeStore`, whose `set` / `get` raise ("Not implemented"); the step
catches that and falls back to 1 (the spec's value). The number scales the learning rate
(`lr = 0.1 * n`, a Python float; no tensor op, no collective, no thread).
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.0118 after step 2).
prove --torch at ff7d7f1: **EQUIVALENT** (4 goals by rewriting, 15 s): a false accept (R35a-2).
Control: r35a_02 / r35a_06 (lr 0.1 * 1 in every run: EQUIVALENT).
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


def _ranks_through_store(ws):
    try:
        store = c10d._get_default_store()
        store.set(f"r35a_{dist.get_rank()}", "1")
        return float(sum(int(store.get(f"r35a_{r}")) for r in range(ws)))   # WRONG: real 2
    except RuntimeError:
        return 1.0                       # the fake world's store: not implemented


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _ranks_through_store(ws)
    optimizer.step()
    optimizer.zero_grad()
    return loss
