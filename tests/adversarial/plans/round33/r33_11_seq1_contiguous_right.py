"""Round 33, attempt a12 (false-refusal sweep): a right hand-written DDP MLP on (batch, seq,
hidden) inputs whose forward takes ``h.transpose(1, 2).contiguous().transpose(1, 2)``: at the
probe sizes ``contiguous()`` copies (``aten.clone``), at the real sizes (``seq`` 1, one sequence
per rank) it is a no-op and torch records no node: a loose identity that
``check_real_moves`` composes by layout (it passes). Truth (torch4_truth, dp 2): <= 2.8e-17.
Prove at a48d781: UNKNOWN (0 goals compared, 74 s): "not lowered: aten.div.Scalar at ...:47:
literal 1540 (at real sizes 4) depends on the sizes but is no product of the model's dims and
mesh axes" (the loss ``mean``'s divisor: local batch 1 x seq 1 x hidden 4 at the real sizes);
the same at 01859fe (73 s): finding R33-4, predates a48d781."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 2, "seq": 1, "hidden": 4, "ffn": 6}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        h = nn.functional.silu(self.w1(x))
        h = h.transpose(1, 2).contiguous().transpose(1, 2)
        return self.w2(h)


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["seq"], s["hidden"]),
            "y": torch.zeros(s["batch"], s["seq"], s["hidden"])}


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
