"""Round 63c (r63c_07): a right plan (examples/torch/mlp_ddp.py) with a TorchScript helper
(torch.jit.script at import) that the step calls and whose exception it catches, the same on
both sides: f6b296aa reads torch._C._get_caught_jit_exception_class_name /
_get_caught_jit_exception_original_msg, which the first step changes (None before it). Meant to
stay EQUIVALENT; measured: exit 3, refused by the older rule against a step catching an error
while the capture runs it (R35d-2, round 38), before any fingerprint: not f6b296aa's (TorchScript
has no try/except, so a step cannot reach that state without catching). Not in the tests."""

import torch
import torch.distributed as dist
from torch import nn



@torch.jit.script
def _check(n: int) -> int:
    if n > 0:
        raise ValueError("batch checked")
    return n


MESH = {"dp": 2}
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    try:
        _check(1)
    except Exception:   # noqa: BLE001 (torch.jit.Error)
        pass
    with torch.autocast("cpu", enabled=False):
        loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
