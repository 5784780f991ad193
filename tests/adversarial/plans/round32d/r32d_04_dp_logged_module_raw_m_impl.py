"""Round 32d (dp 2): r31_10's wrong CPU kernel of aten::div_.Tensor (the all-reduced gradient
left summed), registered *in the step* through the raw torch._C._DispatchModule kept in the
guard's _LoggedModule as its attribute _m (lib.m._m.impl, never logged in snap.impls), and removed
again with m.reset() before the step returns. The library is an aten IMPL library made at import
with code compiled under torch/library.py's file name (its site reads as torch's, so
snap.libraries does not flag it; r32b_01's forgery, at import rather than in the step).
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 52ab29b: EQUIVALENT (4 goals, 65 s). (A first draft keeping the exec namespace in a global
_NS was UNKNOWN: an opaque global.)"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


import torch.library  # noqa: E402

# an aten IMPL library made at import at a site that reads as torch's (torch/library.py): no
# kernel registered, so nothing to see in the dump; its module is the guard's _LoggedModule


def _library():
    ns: dict = {"torch": torch}
    exec(compile("LIB = torch.library.Library('aten', 'IMPL', 'CPU')", torch.library.__file__,
                 "exec"), ns)
    return ns["LIB"]


_LIB = _library()


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
        m = getattr(_LIB.m, "_m", _LIB.m)   # the raw _DispatchModule behind the log
        m.impl("div_.Tensor", "CPU", _div_cpu, False)
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
        m.reset()                           # the registration gone again
    optimizer.step()
    optimizer.zero_grad()
    return loss
