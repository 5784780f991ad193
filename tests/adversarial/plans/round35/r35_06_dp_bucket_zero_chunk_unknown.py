"""Round 35 (dp 2, right): ZeRO-style: the flat bucket reduce-scattered by hand (all-reduce, then
each rank keeps its chunk flat.chunk(dp)[rank] and all-gathers it back into the buffer):
a rank-dependent slice of a bucket, not lowered (UNKNOWN, a false refusal kept as a limit).
Truth (tests/adversarial/torch4_truth.py FILE 2): <= 5.6e-17. prove --torch: refused, exit 3 (84
s): the slices of the all-gathered buffer (no bucket) "take other entries at the real sizes"
(real_moves); a false refusal kept as a limit (the chunk of the bucket would be UNKNOWN)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"])


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
        g = mesh["dp"].get_group()
        ps = [model.w1.weight, model.w2.weight, model.w2.bias]
        flat = torch.cat([p.grad.view(-1) for p in ps])
        dist.all_reduce(flat, group=g)
        flat.div_(mesh["dp"].size())
        mine = flat.chunk(mesh["dp"].size())[mesh["dp"].get_local_rank()].clone()
        out = torch.empty_like(flat)
        dist.all_gather_into_tensor(out, mine, group=g)
        a = 0
        for p in ps:
            b = a + p.numel()
            p.grad.copy_(out[a:b].view_as(p))
            a = b
    optimizer.step()
    optimizer.zero_grad()
    return loss
