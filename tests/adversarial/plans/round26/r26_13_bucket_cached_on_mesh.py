"""Round 26 (non-pipelined; R26-1's root on main): state cached on the DeviceMesh object is not
compared. Hand-written DDP with a persistent communication buffer per parameter, built on the
first step and cached on the mesh (`mesh._bufs`), the gradient packed with `add_` instead of
`copy_` (the buffer is never zeroed: a classic bucket bug). Step 1, the one traced, starts from
zeros and is right; from step 2 on each buffer adds the previous step's reduced sum. The
step-state fingerprint reads torch's objects (a DeviceMesh) by their public plain attributes
only, so the tensors left on the mesh are not seen."""

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


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        bufs = getattr(mesh, "_bufs", None)
        if bufs is None:                  # built once, on the first step
            bufs = mesh._bufs = [torch.zeros_like(p) for p in model.parameters()]
        for p, b in zip(model.parameters(), bufs):
            b.add_(p.grad)                # (should be copy_: the buffer is reused)
            dist.all_reduce(b, group=mesh["dp"].get_group())
            p.grad.copy_(b / mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
