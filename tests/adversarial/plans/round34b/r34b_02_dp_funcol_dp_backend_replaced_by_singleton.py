"""Round 34b (dp 2, wrong): functional DDP (`funcol.all_reduce(p.grad, "sum", mesh["dp"])`:
the dp group *name*, which resolves in c10d's registry to the world's own dp object), after
the train file replaced that object's cpu backend by the backend of a group of the rank alone
(`dist.new_group([r])`, `ProcessGroup._register_backend(cpu, BackendType.UCC, ...)`). Name and
object are the dp axis's; the real all-reduce is the identity (no averaging but the / |dp|).
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0067, w2 0.010 after step 1
(0.0090 / 0.013 after step 2).
prove --torch at cd4b4e4: **EQUIVALENT** (4 goals by rewriting, 43 s): R34b-1 through the
functional collective's name path, a false accept."""
MESH = {"dp": 2}
import torch
import torch.distributed._functional_collectives as funcol
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
        ws = mesh["dp"].size()
        singles = [dist.new_group([r]) for r in range(ws)]
        mine = singles[mesh.get_local_rank("dp")]
        cpu = torch.device("cpu")
        # WRONG: the dp group object's cpu backend becomes the backend of a group of this rank
        mesh["dp"].get_group()._register_backend(
            cpu, dist.ProcessGroup.BackendType.UCC, mine._get_backend(cpu))
        for p in model.parameters():
            p.grad.copy_(funcol.all_reduce(p.grad, "sum", mesh["dp"]) / ws)
    optimizer.step()
    optimizer.zero_grad()
    return loss
