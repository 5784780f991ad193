"""Round 32b, R32b-3 a (dp 2): R32-4's kernel (r32_06: aten::div_.Tensor returning its input on
AutogradCPU, registered inside train_step after the last collective and destroyed before it
returns) made through a torch.library.Library whose registration site is forged: the Library is
created by code compiled with torch/library.py's file name (exec(compile(src,
torch.library.__file__, "exec"))), and Library.__init__ takes (filename, lineno) from its
caller's frame. dispatcher_guard's log of libraries (the R32-4 fix, a wrapper of
torch._C._dispatch_library) records it as ("IMPL", "aten", ".../torch/library.py:1") and
kernel_changes exempts every library whose site is a torch file (_torch_file). The C++
registrations are back as they were at every check point. (A first draft held the compiled code
object in a module global: UNKNOWN step-state, 19 s.)
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012 (as r31_10);
control r32_02 (no kernel) 0.0 / 2.8e-17.
At 6749c1d: exit 3 (8 s) for R32b-1's reason (prims::inductor_random "registered at name: ...",
every plan refused); at 6749c1d + R32b-1's one-line fix (the front end of 86fb1ce): EQUIVALENT
(4 goals, 31 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _div_cpu(self, other):
    return self


# code whose file name is torch's: torch.library.Library takes its registration site from its
# caller's frame (f_code.co_filename), the guard's log of libraries exempts torch's files
_FORGED = 'lib = torch.library.Library("aten", "IMPL")'


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
        ns = {"torch": torch}
        exec(compile(_FORGED, torch.library.__file__, "exec"), ns)      # Library's caller frame: torch/library.py, line 1
        lib = ns["lib"]
        lib.impl("div_.Tensor", _div_cpu, "AutogradCPU")
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
        lib._destroy()
    optimizer.step()
    optimizer.zero_grad()
    return loss
