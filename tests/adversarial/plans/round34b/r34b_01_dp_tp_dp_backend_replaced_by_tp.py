"""Round 34b (dp 2 x tp 2, wrong): hand-written DDP (`dist.all_reduce(p.grad, group=dp)`)
over the world's own dp group object, whose cpu backend the train file replaced by the tp
group's backend (`ProcessGroup._register_backend(cpu, BackendType.UCC, tp._get_backend(cpu))`).
The object is the dp axis's (identity holds, its name resolves to it), but the real all-reduce
runs on the tp backend (the ranks holding the same batch shard).
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0088, w2 0.018 on every rank after one step
(as r33b_01: the all-reduce over tp).
prove --torch at cd4b4e4: **EQUIVALENT** (4 goals by rewriting, 107 s): R34b-1, a false accept.
Control: r34b_05 (its own backend re-registered, truth 2.8e-17, EQUIVALENT)."""
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
        dpg, tpg = mesh["dp"].get_group(), mesh["tp"].get_group()
        cpu = torch.device("cpu")
        # WRONG: the dp group object's cpu backend becomes the tp group's (a backend type
        # neither has, so setBackend stores it for the device)
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.UCC, tpg._get_backend(cpu))
        for p in model.parameters():
            dist.all_reduce(p.grad, group=dpg)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
