"""Round 64b (r64b_06): R64b-3: a right plan (mlp_ddp) that at import binds in torch.nn.functional a
function whose `__module__` is an object with an `__eq__` of its own (here one that raises):
`process_state._from_user` compares `v.__module__ == "__main__"` (15ba917d guarded the line's
first test with `_name`, not the second), so the train file's code runs inside the fingerprint.
Must be EQUIVALENT or UNKNOWN, not a crash."""
import torch.nn.functional as _F


import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}


class _Mod:
    def __eq__(self, other):
        raise RuntimeError("r64b_06: the train file's __eq__ ran inside the fingerprint")

    __hash__ = object.__hash__


def _helper():
    pass


_helper.__module__ = _Mod()
_F._r64b_helper = _helper
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
