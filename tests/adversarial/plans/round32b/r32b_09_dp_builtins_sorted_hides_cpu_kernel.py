"""Round 32b, R32b-5 (dp 2): a *persistent* CPU kernel of aten::div_.Tensor (r31_10's: returns its
input, the all-reduced gradient left summed), registered at import, hidden from every check by
replacing a builtin the guard looks up when it runs. dispatcher_guard.kernel_changes compares
each op's dump in ``for key in sorted(set(before) | set(now))``; the train file puts on
builtins a ``sorted`` that answers [] when its caller is kernel_changes (and is torch's sorted
otherwise). The R32-2 fix bound _dispatch_dump, _dispatch_get_all_op_names, gc.get_objects and
_dispatch_library at the guard's import, not the builtins (sorted, set, issubclass, type, vars,
dict, getattr) nor os.path (_torch_file). The library is made through the wrapper's _LIBRARY
(R32b-3 c) so the library log stays empty. The step-state comparison (builtins included) is
before / after the step: a builtin replaced at import is the same on both sides. The step is
plain hand-written DDP: no Python dispatcher, nothing registered inside it.
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 86fb1ce: EQUIVALENT (4 goals, 46 s)."""

import builtins
import sys

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _div_cpu(self, other):
    return self


def _install():
    # dispatcher_guard.kernel_changes compares each op's dump lines in
    # ``for key in sorted(set(before) | set(now))``: builtins.sorted, looked up when it runs,
    # answers [] to that one caller
    real_sorted = builtins.sorted

    def sorted(iterable, /, *args, **kwargs):  # noqa: A001
        if sys._getframe(1).f_code.co_name == "kernel_changes":
            return []
        return real_sorted(iterable, *args, **kwargs)

    builtins.sorted = sorted
    # torch's _dispatch_library (the guard's wrapper keeps it as _LIBRARY: R32b-3 c), so the
    # library is not logged; held in a closure (a global holding it would be unreadable state)
    make = getattr(torch._C._dispatch_library, "__globals__", {}).get(
        "_LIBRARY", torch._C._dispatch_library)
    lib = make("IMPL", "aten", "", __file__, 1)
    lib.impl("div_.Tensor", "CPU", _div_cpu, False)
    return lambda: lib


_KEEP = _install()


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
