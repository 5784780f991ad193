"""Round 31, R31-2 beyond c10d (dp 2): hand-written DDP (plain dist.all_reduce, then
p.grad.div_(2)) with the train file's own CPU kernel of aten::div_.Tensor registered at import
(torch.library.Library("aten", "IMPL")): it returns the tensor undivided. The capture traces on
meta tensors (the Meta kernel runs there); the real CPU run steps with the summed gradient
(only the parallel step calls div_ in place). Wrong: truth (torch4_truth.py FILE 2) update w1
0.0070, w2 0.0093; step 2 0.0086 / 0.012 (= 2x the gradient). EQUIVALENT at 0f22574 (60 s).
(A first draft overriding div_.Scalar was never called: Python scalars reach div_.Tensor;
truth 5.6e-17.)"""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

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
