"""Round 13 adversarial train file: a function of the train file left as a method of a torch
class: both steps set `nn.Linear.forward = _linear_forward` (halving on the ranks only).
R12-3's fix marks a torch module UNCOMPARABLE when one of its *globals* is the user's code
(`process_state._from_user`); the attributes of a class defined in a torch module are read by
`_ident` only (module, name, file, line, bytecode), never passed to `_from_user`, so both
steps leave the same text and it is accepted (R9-2 saw the replacement; R11-7's rule misses it).
Wrong from step 2 on. (The aot_autograd import loads, before the step, the torch modules
the traced step would import lazily: their finalizers otherwise make every file UNKNOWN, F11-1.)"""

import torch
import torch._functorch.aot_autograd  # noqa: F401 -- loaded before the step, as after a first step
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


def _linear_forward(self, x):
    return nn.functional.linear(x, self.weight, self.bias) * (0.5 if dist.is_initialized() else 1.0)


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x))) * 1.0


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    nn.Linear.forward = _linear_forward
    return loss
