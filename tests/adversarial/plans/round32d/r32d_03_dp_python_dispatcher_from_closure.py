"""Round 32d (dp 2): r32b_02 (Python kernel of aten::div_.Tensor set, run under the Python
dispatcher and removed inside the step) with torch's _EnablePythonDispatcher taken out of the
guard's wrapper's closure (cell "enable") at import: the wrapper is never called, so
dispatcher_on stays empty. (The R32b-3 r32b_06 family: the original reachable through the
wrapper.)
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 52ab29b: EQUIVALENT (4 goals, 81 s, two proves sharing the 2 cores). (A first draft keeping
the wrapper in a global _w was UNKNOWN: an opaque global.)"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


_CPU = torch._C.DispatchKey.CPU
# torch's own class, out of the guard's wrapper's closure (its cell "enable")


def _torchs_enable():
    w = torch._C._EnablePythonDispatcher
    if not getattr(w, "__closure__", None):
        return w
    cells = dict(zip(w.__code__.co_freevars, (c.cell_contents for c in w.__closure__)))
    return cells.get("enable", w)


_ENABLE = _torchs_enable()


def _div_cpu(self, other):
    return self


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
        op = torch.ops.aten.div_.Tensor
        op.py_kernels[_CPU] = _div_cpu
        op._dispatch_cache.pop(_CPU, None)
        with _ENABLE():
            for p in model.parameters():
                p.grad.div_(mesh["dp"].size())
        del op.py_kernels[_CPU]
        op._dispatch_cache.pop(_CPU, None)
    optimizer.step()
    optimizer.zero_grad()
    return loss
