"""Round 32, R32-1 (dp 2): hand-written DDP (dist.all_reduce of every gradient, then
torch._foreach_div_(grads, 2)) with the train file's own kernel of aten::_foreach_div_.Scalar
registered at import on the *alias* key CompositeExplicitAutograd (torch.library.Library("aten",
"IMPL").impl(..., "CompositeExplicitAutograd")): it divides nothing. The op has no CPU kernel
(the CPU entry of the dispatch table comes from its CompositeExplicitAutograd kernel), so the
real run calls the train file's; meta / fake tensors use the op's own Meta kernel.
dispatcher_guard._LINE (`KEY( (inactive))?: registered at`) does not match
`CompositeExplicitAutograd[alias]: registered at ...` lines: no alias-key registration
(Autograd, CompositeImplicitAutograd, CompositeExplicitAutograd,
CompositeExplicitAutogradNonFunctional, FuncTorchBatchedDecomposition) is in the snapshot,
neither torch's nor the train file's (kernel_changes() == [] in-process). Wrong: truth
(torch4_truth.py FILE 2) update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012 (as r31_10).
EQUIVALENT at ddc6b7a (4 goals, 50 s). Control r32_02."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}

_LIB = torch.library.Library("aten", "IMPL")


def _foreach_div_noop(self, scalar):
    return None


_LIB.impl("_foreach_div_.Scalar", _foreach_div_noop, "CompositeExplicitAutograd")


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
        grads = [p.grad for p in model.parameters()]
        for g in grads:
            dist.all_reduce(g, group=pg)
        torch._foreach_div_(grads, mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
