"""Round 13 adversarial train file: r12_03 with the monkeypatching idiom, `functools.wraps`:
both steps install `_silu` of the train file, decorated `@functools.wraps(F.silu)`, as
`torch.nn.functional.silu`. `wraps` copies torch's `__module__`, `__qualname__` and sets
`__wrapped__` to torch's silu, so `process_state._from_user` (R12-3's fix) sees torch's
function, the entry is not UNCOMPARABLE, both steps leave the same text and it is accepted.
Step 2's forward runs the new silu: halved on the ranks only.
Wrong from step 2 on. (The aot_autograd import loads, before the step, the torch modules
the traced step would import lazily: their finalizers otherwise make every file UNKNOWN, F11-1.)"""

import functools

import torch
import torch._functorch.aot_autograd  # noqa: F401 -- loaded before the step, as after a first step
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

_TORCH_SILU = torch.nn.functional.silu


@functools.wraps(_TORCH_SILU)
def _silu(x, inplace=False):
    return _TORCH_SILU(x) * (0.5 if dist.is_initialized() else 1.0)


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
    torch.nn.functional.silu = _silu
    return loss
