"""Round 33b (dp 2, wrong): R33b-1 on a one-axis mesh: each rank all-reduces over a group of
itself alone (`dist.new_group([r])`, made in the step) renamed to the dp group's name; the
real all-reduce is the identity (no averaging: each rank steps on its own shard's gradient),
the capture's ProcessGroupRef names the dp axis.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0067, w2 0.010 after step 1
(0.0090 / 0.013 after step 2). prove --torch at f2928c8: **EQUIVALENT** (4 goals by rewriting,
106 s): R33b-1 on a one-axis mesh, a false accept."""
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        singles = [dist.new_group([r]) for r in range(ws)]
        g1 = singles[mesh.get_local_rank("dp")]
        g1._set_group_name(mesh["dp"].get_group().group_name)   # WRONG: a group of one as dp
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g1)
    optimizer.step()
    optimizer.zero_grad()
    return loss
