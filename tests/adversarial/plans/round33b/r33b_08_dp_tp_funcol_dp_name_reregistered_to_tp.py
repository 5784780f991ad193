"""Round 33b (dp 2 x tp 2, wrong): hand-written DDP with a functional all-reduce over
`mesh["dp"]` (a group *name*), after the train file re-registers the dp group's name to the
tp process group in c10d's registry (`_unregister_process_group` / `_register_process_group`).
The capture records the name, which the world maps to the dp axis; the real functional
collective resolves the name to the tp group (the ranks holding the same batch shard).
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0088, w2 0.018 on every rank after one
step. prove --torch at f2928c8: **EQUIVALENT** (4 goals by rewriting,
110 s): R33b-2, a false accept. Control: r32d_10's pattern without the re-registration."""
MESH = {"dp": 2, "tp": 2}
import torch.distributed._functional_collectives as funcol
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
        c10d = torch._C._distributed_c10d
        dp_name = mesh["dp"].get_group().group_name
        tpg = mesh["tp"].get_group()
        c10d._unregister_process_group(dp_name)
        c10d._register_process_group(dp_name, tpg)     # WRONG: the dp name resolves to tp
        for p in model.parameters():
            p.grad.copy_(funcol.all_reduce(p.grad, "sum", mesh["dp"]) / mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
