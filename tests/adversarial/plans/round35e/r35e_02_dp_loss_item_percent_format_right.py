"""Round 35e (dp 2, right): r35d_06 with %-formatting instead of a format spec:
`print("loss %.4f" % loss.item())` at the end of the step (logging only). `%f` calls
`SymFloat.__float__`, not `__format__`, so 7e4c002's patch does not apply.
Truth (torch4_truth FILE 2): w1 0.0, w2 2.8e-17 (both steps): right.
prove --torch at 7e4c002: **exit 3** (15 s) "line 46: capturing the training step failed:
GuardOnDataDependentSymNode: Could not guard on data-dependent expression zuf0": a false refusal
(R35e-2; R35d-5 through `%`, which 7e4c002 does not cover).
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




def _log(loss):
    print("loss %.4f" % loss.item())


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    _log(loss)                                            # logging only: no effect on the step
    return loss
