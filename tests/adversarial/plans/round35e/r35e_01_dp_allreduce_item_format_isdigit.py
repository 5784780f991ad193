"""Round 35e (dp 2, wrong): the step formats the all-reduced ones with a format spec,
`s = f"{t.item():.0f}"`, and reads the text without any exception: `float(s) if s.isdigit()
else 1.0`. Real run: "2" -> 2.0. Capture at 7e4c002: `.item()` of the fake tensor is an unbacked
SymFloat, whose patched `__format__` (thread_guard._symbols_formatted) returns "zuf0", so 1.0
(the spec's). At 5455d86 the format raised TypeError (uncaught): the capture stopped (exit 3).
`lr = 0.1 * n`.
Truth (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.0118 after step 2).
prove --torch at 7e4c002: **EQUIVALENT** (4 goals, 47 s): a false accept (R35e-1). At 5455d86:
exit 3 (13 s) "capturing the training step failed: TypeError: unsupported format string passed
to SymFloat.__format__".
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
    t = torch.ones(1)
    dist.all_reduce(t, group=mesh["dp"].get_group())
    s = f"{t.item():.0f}"                                      # "2" real; "zuf0" in the capture
    return float(s) if s.isdigit() else 1.0                    # WRONG: real 2, no exception


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
