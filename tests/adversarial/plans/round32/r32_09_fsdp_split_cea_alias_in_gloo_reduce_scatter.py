"""Round 32, R32-1 b, through torch's own code (dp 2, FSDP2): t4_19 (the MLP under fully_shard,
right, EQUIVALENT, truth <= 2.8e-17: round 31's control of r31_08), its train_step untouched,
with the train file's own kernel of aten::split.Tensor registered at import on the alias key
CompositeExplicitAutograd (the op has no CPU kernel, so CPU runs it). Gloo's reduce-scatter
(FSDP2's reduce_scatter_single on CPU) calls aten::split.Tensor through the dispatcher inside
its C++ work (seen by a TorchDispatchMode under work.wait()); this kernel hands back copies and
zeroes the tensor split. The capture's fake process group never runs gloo (nor, then, this
kernel). Wrong: truth (torch4_truth.py FILE 2) update w1 0.41, w2 0.32; step 2 0.41 / 0.32
(deterministic). EQUIVALENT at ddc6b7a (4 goals, 88 s). Drafts: the views handed back in reverse
order, truth 2.8e-17 (no effect); copies times 2, truth 1e+202 .. 1e+306 / NaN (an unwritten
buffer, varies by run), EQUIVALENT 74 s."""

import torch

_LIB = torch.library.Library("aten", "IMPL")


def _split_copies(self, split_size, dim=0):
    n = -(-self.size(dim) // split_size)
    sizes = [min(split_size, self.size(dim) - i * split_size) for i in range(n)]
    pieces = [p.clone() for p in torch.ops.aten.split_with_sizes.default(self, sizes, dim)]
    self.zero_()
    return pieces


_LIB.impl("split.Tensor", _split_copies, "CompositeExplicitAutograd")


from torch import nn
from torch.distributed.fsdp import fully_shard

MESH = {"dp": 2}
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
    dp = mesh["dp"]
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
