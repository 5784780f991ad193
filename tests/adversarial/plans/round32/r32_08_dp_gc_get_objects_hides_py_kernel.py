"""Round 32, R32-2 b (dp 2): the Python-kernel half of the dispatcher guard fooled as r32_03 fools
the C++ half: the train file puts its own function in torch.ops.aten.div_.Tensor's py_kernels
for DispatchKey.CPU (OpOverload.py_impl; it returns its input: the all-reduced gradient left
summed), keeps the Python dispatcher enabled, then replaces gc.get_objects (module gc, watched
by no guard) by one that leaves that OpOverload out. dispatcher_guard._python_kernels finds the
OpOverloads alive with gc.get_objects() at every check, so it never sees the op. Wrong: truth
(torch4_truth.py FILE 2) update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012 (as r31_10).
EQUIVALENT at ddc6b7a (4 goals, 72 s)."""

import gc

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _div_cpu(self, other):
    return self


def _hide(op):
    objects = gc.get_objects
    gc.get_objects = lambda *a: [o for o in objects(*a) if o is not op]


torch.ops.aten.div_.Tensor.py_impl(torch._C.DispatchKey.CPU)(_div_cpu)
_hide(torch.ops.aten.div_.Tensor)
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
