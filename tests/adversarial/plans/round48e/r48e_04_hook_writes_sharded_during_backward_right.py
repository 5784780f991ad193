"""Idea (round 48e): a post-accumulate-grad hook on w1's (unsharded) parameter, registered in a forward hook and removed at the end of the step, halves the SHARDED w1 (the optimizer's parameter) during the backward, after the accumulation and before the post-backward. Serial halves w1 after its gradient was made; FSDP2 halves the shard, the leaf is dropped at reshard: right plan (needless refusal at collect?)."""
MESH = {"dp": 2}
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    fully_shard(model.w1, mesh=mesh["dp"])
    fully_shard(model.w2, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


H = []


def _fwd(mod, args, out):
    sp = mod.sharded_ref[0]

    def _h(p):
        with torch.no_grad():
            sp.mul_(0.5)
    if not H:
        H.append(mod.weight.register_post_accumulate_grad_hook(_h))


def build_model(s):
    m = MLP(s["hidden"], s["ffn"])
    m.w1.register_forward_hook(_fwd)
    return m


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    model.w1.sharded_ref = [optimizer.param_groups[0]["params"][1]]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    for h in H:
        h.remove()
    H.clear()
    return loss
