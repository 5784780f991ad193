"""Round 32, R32-3 b (dp 2): r32_04 with a function of the train file: r31_10's wrong kernel
(aten::div_.Tensor on CPU returns its input) written straight into
torch.ops.aten.div_.Tensor._dispatch_cache[DispatchKey.CPU], the cache the Python dispatcher
consults before py_kernels, with the Python dispatcher kept enabled
(torch._C._EnablePythonDispatcher(), held in a global). dispatcher_guard compares py_kernels /
python_key_table / functorch_table, not _dispatch_cache; the C++ registrations do not change;
the capture's fake tensors never dispatch on the CPU key. Wrong: truth (torch4_truth.py FILE 2)
update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012 (as r31_10). EQUIVALENT at ddc6b7a (4 goals,
57 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _div_cpu(self, other):
    return self


# the Python dispatcher's cache of resolved kernels, not its tables (py_kernels etc.)
torch.ops.aten.div_.Tensor._dispatch_cache[torch._C.DispatchKey.CPU] = _div_cpu
_PYTHON_DISPATCHER = torch._C._EnablePythonDispatcher()


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
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
