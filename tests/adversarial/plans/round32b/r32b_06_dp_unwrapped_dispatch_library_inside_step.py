"""Round 32b, R32b-3 c (dp 2): r32b_01's kernel made through torch's own _dispatch_library: the
guard's wrapper (dispatcher_guard.take_snapshot's dispatch_library, put on torch._C) is a
function of dispatcher_guard, whose module globals hold torch's function as _LIBRARY (bound at
import for R32-2); torch._C._dispatch_library.__globals__["_LIBRARY"] makes a library the log
never sees (site: the train file itself). m.impl("div_.Tensor", "AutogradCPU", f, False) inside
the step after the last collective, m.reset() before it returns. (In the truth's processes no
guard is installed: the plan falls back to torch._C._dispatch_library.)
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 86fb1ce: EQUIVALENT (4 goals, 47 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


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
        # the guard's wrapper of torch._C._dispatch_library keeps torch's function in its
        # module's globals: a library made through it is not logged
        make = getattr(torch._C._dispatch_library, "__globals__", {}).get(
            "_LIBRARY", torch._C._dispatch_library)
        m = make("IMPL", "aten", "", __file__, 1)
        m.impl("div_.Tensor", "AutogradCPU", _div_cpu, False)
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
        m.reset()
    optimizer.step()
    optimizer.zero_grad()
    return loss
