"""Round 41b (dp 2, wrong): R41b-2 with the process's stdout unchanged: `print("\\ud800")` (a lone
surrogate) raises UnicodeEncodeError on any UTF-8 stream (strict or surrogateescape) in the real
run; the capture skips the call. The except branch doubles lr.
Truth (torch4_truth FILE 2): w1 0.0070, w2 0.0093 after step 1 (0.0086 / 0.012 after step 2):
the real print raises.
prove --torch at a323fd2: **EQUIVALENT** (4 goals, 87 s): a false accept (R41b-2).
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

def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        try:
            print("\ud800")                                # real: UnicodeEncodeError
        except UnicodeEncodeError:
            optimizer.param_groups[0]["lr"] = 0.2
    optimizer.step()
    optimizer.zero_grad()
    return loss
