"""Round 32, R32-3 (dp 2): r31_10's wrong kernel (aten::div_.Tensor on CPU returns its input: the
all-reduced gradient left summed) without torch.library and without a function of the train
file: at import the train file puts typing.assert_type (standard library, `assert_type(val, typ)
-> val`) in the Python kernel table of torch.ops.aten.div_.Tensor for DispatchKey.CPU
(OpOverload.py_impl) and keeps the Python dispatcher enabled
(torch._C._EnablePythonDispatcher(), held in a global), so the real CPU run calls it.
dispatcher_guard sees the new py_kernels entry but exempts it: _own_kernel accepts any function
whose code existed before the train file ran. The C++ registrations do not change; the capture's
fake tensors never dispatch on the CPU key. Wrong: truth (torch4_truth.py FILE 2) update w1
0.0070, w2 0.0093; step 2 0.0086 / 0.012 (as r31_10). EQUIVALENT at ddc6b7a (4 goals, 33 s)."""

import typing

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

torch.ops.aten.div_.Tensor.py_impl(torch._C.DispatchKey.CPU)(typing.assert_type)
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
