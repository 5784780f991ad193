"""Stop 44 (dp 2, wrong): parallelize halves every weight through ``p.data.mul_(0.5)``: the
write goes through ``p.data`` (a tensor with its own version counter over the same memory), so
``p._version`` does not move; the plan starts from halved weights, the single-device model not.
The parallelize guard counts writes by storage (R39c-1): exit 3.
Truth (torch4_truth.py FILE 2): step 1 a.weight 0.19, b.weight 0.20 (wrong). Verdict: EQUIVALENT at a9166a7
(49 s, a false accept: R39c-1); exit 3 since stop 44 (18 s).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.a = nn.Linear(h, h, bias=False)
        self.b = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return self.b(nn.functional.silu(self.a(x)))


def build_model(s):
    return MLP(s["hidden"])


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


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


def parallelize(model, mesh):
    for p in model.parameters():
        p.data.mul_(0.5)
    return model
