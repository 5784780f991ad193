"""Round 32, R32-2 (dp 2): r31_10 (the train file's own CPU kernel of aten::div_.Tensor, returning
its input: the all-reduced gradient left summed) with the dispatcher guard's own input replaced:
before registering, the train file records torch._C._dispatch_dump's text of every operator and
puts on torch._C (a module no guard watches) a function answering from that record.
dispatcher_guard._registrations looks torch._C._dispatch_dump up at every call, so the
comparisons after the import and after the step see the dispatcher as it was. The record is held
in the function's closure: a first draft keeping torch's dump function in a global (`_DUMP`) was
UNKNOWN step-state ("cannot read the global _DUMP ... opaque pybind11 function", 73 s). Wrong:
truth (torch4_truth.py FILE 2) update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012 (as r31_10).
EQUIVALENT at ddc6b7a (4 goals, 71 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _answer_as_before():
    dump = torch._C._dispatch_dump
    text = {n: dump(n) for n in torch._C._dispatch_get_all_op_names()}
    torch._C._dispatch_dump = lambda name: text[name] if name in text else dump(name)


_answer_as_before()

_LIB = torch.library.Library("aten", "IMPL")


def _div_cpu(self, other):
    return self


_LIB.impl("div_.Tensor", _div_cpu, "CPU")


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
