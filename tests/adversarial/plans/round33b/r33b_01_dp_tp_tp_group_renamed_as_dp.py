"""Round 33b (dp 2 x tp 2, wrong): hand-written DDP whose all-reduce runs over the tp group
renamed to the dp group's name (`ProcessGroup._set_group_name`). The capture records the
group as a ProcessGroupRef by its name, which the world maps to the dp axis; the real
all-reduce runs over tp (the ranks holding the same batch shard).
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0088, w2 0.018 on every rank after one
step (as r32d_11, the all-reduce over tp). prove --torch at f2928c8: **EQUIVALENT** (4 goals by
rewriting, 156 s): R33b-1, a false accept. Control: r32d_07 (the same plan without the rename,
truth 2.8e-17)."""
MESH = {"dp": 2, "tp": 2}
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        tpg = mesh["tp"].get_group()
        tpg._set_group_name(mesh["dp"].get_group().group_name)   # WRONG: tp named as dp
        for p in model.parameters():
            dist.all_reduce(p.grad, group=tpg)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
