"""Round 32b, R32b-2 (dp 2): r31_10's wrong kernel (aten::div_.Tensor returns its input: the
all-reduced gradient left summed) as a *Python* kernel, only inside the step: after the last
collective, train_step puts its function in torch.ops.aten.div_.Tensor.py_kernels[CPU], enables
the Python dispatcher (torch._C._EnablePythonDispatcher()) around the division, then deletes the
entry and its _dispatch_cache entry and leaves the Python dispatcher disabled. The R32-3 fix
reads py_kernels / _dispatch_cache and the Python dispatcher's TLS bit only after the import
and after the step (kernel_changes with prefixes=None); the checks around collectives pass
prefixes (c10d ops' C++ registrations only), and the R32-4 fix logs torch._C._dispatch_library
calls, which py_kernels never makes. The capture's fake tensors are handled at the Python key,
never the CPU one.
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 6749c1d: exit 3 (8 s, R32b-1's reason); at 6749c1d + R32b-1's fix: EQUIVALENT (4 goals,
25 s); at 86fb1ce (R32b-1 fixed): EQUIVALENT (4 goals, 44 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


_CPU = torch._C.DispatchKey.CPU


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
        with torch._C._EnablePythonDispatcher():
            for p in model.parameters():
                p.grad.div_(mesh["dp"].size())
        del op.py_kernels[_CPU]
        op._dispatch_cache.pop(_CPU, None)
    optimizer.step()
    optimizer.zero_grad()
    return loss
