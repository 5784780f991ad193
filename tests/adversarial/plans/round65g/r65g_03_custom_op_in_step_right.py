"""Round 65g (r65g_03): a right plan: examples/torch/mlp_ddp.py whose input passes through a torch.library custom op (r65g_lib::ident, a clone with a fake kernel) called in train_step: torch.ops.r65g_lib caches its packet on first use, on both sides. Expected EQUIVALENT (no false refusal from op_namespaces.namespace_data)."""

import torch
import torch.distributed as dist
from torch import nn

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
    return model


@torch.library.custom_op("r65g_lib::ident", mutates_args=())
def _ident(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_ident.register_fake
def _(x):
    return torch.empty_like(x)


def train_step(model, optimizer, batch, mesh):
    x = torch.ops.r65g_lib.ident(batch["x"])
    loss = ((model(x) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
