"""Round 38c (dp 2, wrong): Megatron's contiguous parameter buffer: `parallelize` makes every
parameter a view of one flat buffer (`p.data = flat[a:b].view_as(p)`); the dp step all-reduces
the gradients, then zeroes the buffer it means to be the gradient bucket but is the parameter
buffer (`model._flat.zero_()`): the real run's weights are 0 before the step, the spec's are not.
Truth (torch4_truth.py FILE 1): w1 0.41, w2 0.32.
Verdict (wip/r38 18debf8): exit 3 (21 s), line 57: "capturing the training step failed:
AssertionError: Please convert all Tensors to FakeTensors first" (the flat buffer made in
`parallelize` is a meta tensor, not fake): sound (not accepted).
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    ps = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in ps])
    a = 0
    for p in ps:
        p.data = flat[a:a + p.numel()].view_as(p)
        a += p.numel()
    model._flat = flat
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        # WRONG: the parameters' buffer, not a gradient bucket
        model._flat.zero_()
    optimizer.step()
    optimizer.zero_grad()
    return loss
