"""Round 38a (dp 2, right): r37b_05 without the duplicate: Megatron's `main_grad` buffer, the
gradients accumulated with one `torch._foreach_add_(mains, grads)` into w1's and w2's
*disjoint* pieces of one flat buffer. f3401a8's `aliasing.written_twice` compares the written
tensors' roots (the base buffer), not their ranges: two disjoint pieces of one buffer share it.
Truth (torch4_truth.py FILE 1): w1 6e-17, w2 0.0 (right).
Verdict (main 4d89de3): UNKNOWN (21 s; 53 s on a rerun): "aten._foreach_add_.List ... an in-place
op wrote an unexpected number of tensors, or one storage twice": false refusal R38a-6. At
5af31f2 (f3401a8's parent): EQUIVALENT (53 s).
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
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        ps = [model.w1.weight, model.w2.weight]
        n = sum(p.numel() for p in ps)
        buf = torch.zeros(n, dtype=ps[0].dtype, device=ps[0].device)
        mains, a = [], 0
        for p in ps:
            mains.append(buf[a:a + p.numel()].view_as(p))
            a += p.numel()
        grads = [p.grad for p in ps]
        # right: each gradient added into its own (disjoint) piece of the one buffer
        torch._foreach_add_(mains, grads)
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        for p, m in zip(ps, mains):
            p.grad = m
    optimizer.step()
    optimizer.zero_grad()
    return loss
