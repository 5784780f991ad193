"""Round 32b, R32b-2 b (dp 2): a *dispatch key* in the Python dispatcher's cache, set at import and
left there: torch.ops.aten.div_.Tensor._dispatch_cache[DispatchKey.CPU] = DispatchKey.Meta
sends div_ of a CPU tensor to its Meta kernel (shape checks, nothing written). The R32-3 fix
compares _dispatch_cache but _own_kernel takes any DispatchKey value for torch's ("what
_dispatch_cache holds for a C++ kernel"), so the entry passes the checks after the import and
after the step; the step enables the Python dispatcher only around its division (R32b-2's
window). The capture's fake tensors are handled at the Python key.
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 86fb1ce: EQUIVALENT (4 goals, 35 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


# a dispatch key, not a function, in the Python dispatcher's cache: the CPU entry of div_ sent to
# its Meta kernel (computes the output's metadata, writes nothing)
torch.ops.aten.div_.Tensor._dispatch_cache[torch._C.DispatchKey.CPU] = torch._C.DispatchKey.Meta


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
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        pg = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=pg)
        with torch._C._EnablePythonDispatcher():
            for p in model.parameters():
                p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
