"""Round 35d (dp 2, wrong): R35a-3 without an exception: the step all-reduces ones over dp and
reads `.item()` only when the tensor is a plain real tensor (`type(t) is torch.Tensor and not
t.is_meta`); in the capture (meta / FakeTensor) it takes 1.0, the spec's; in the real run 2.0.
`lr = 0.1 * n`. Nothing raises, so `one_thread`'s data-dependent record never fires.
Truth (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.0118 after step 2).
prove --torch at 2acd1b3: **EQUIVALENT** (4 goals by rewriting, 90 s, loaded): a false accept (R35d-1).
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
    if type(t) is torch.Tensor and not t.is_meta:         # WRONG: real 2
        return float(t.item())
    return 1.0                                            # the capture's fake tensor


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
