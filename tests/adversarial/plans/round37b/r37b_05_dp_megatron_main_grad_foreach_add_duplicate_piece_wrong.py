"""Round 37b (dp 2, wrong): Megatron's `main_grad` buffer (R36b-3's rules: a zeroed buffer cut
by its slices, writes through one piece), the gradients accumulated with one
`torch._foreach_add_(mains, grads)` whose lists name w1's piece twice (a duplicated entry). The
real foreach adds tensor by tensor: w1's `main_grad` is `2 * g1`. make_fx records one
`_foreach_add_.List` node whose results are all computed from the inputs before it: `m1 + g1`
twice, each written back through piece 0.
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0 (wrong: w1's gradient doubled).
Verdict (wip/r37 d782147): **EQUIVALENT** (66 s): false accept R37b-3.
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
        # WRONG: w1's main_grad and gradient listed twice: added twice in the real run
        torch._foreach_add_(mains + mains[:1], grads + grads[:1])
        dist.all_reduce(buf, group=mesh["dp"].get_group())
        buf.div_(mesh["dp"].size())
        for p, m in zip(ps, mains):
            p.grad = m
    optimizer.step()
    optimizer.zero_grad()
    return loss
