"""Round 34b (pp 2 x dp 2, wrong): R34b-1 on a pipeline. r22_00's MLP (PipelineStage,
ScheduleGPipe, 2 micro-batches) with hand-written dp after the schedule, whose all-reduce
runs over the world's dp group object after its cpu backend was replaced by a group of the
rank alone (`ProcessGroup._register_backend(cpu, BackendType.UCC, single._get_backend(cpu))`).
Truth (tests/torch_frontend/pp_truth.py FILE): grad l0.weight 0.077, l0.bias 0.061, l1.weight
0.12, l1.bias 0.21; update 0.038 / 0.030 / 0.059 / 0.10.
prove --torch at cd4b4e4: **EQUIVALENT** (8 goals by rewriting, 34 s): R34b-1 on a pipeline,
a false accept. Control: round 22's r22_00 (right; EQUIVALENT in round 22, not rerun here)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}
N_MICROBATCHES = 2


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        return self.l1(torch.tanh(self.l0(x)))


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.l0 = model.l0 if stage == 0 else None
        self.l1 = model.l1 if stage == 1 else None

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h))
        if self.l1 is not None:
            h = self.l1(h)
        return h


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["x"],) if stage.is_first else ()
        schedule.step(*args, target=batch["y"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        cpu = torch.device("cpu")
        singles = [dist.new_group([r]) for r in range(dist.get_world_size())]
        mine = singles[dist.get_rank()]
        dpg = mesh["dp"].get_group()
        # WRONG: the dp group object's cpu backend becomes a group of the rank alone
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.UCC, mine._get_backend(cpu))
        for p in model.parameters():
            dist.all_reduce(p.grad, group=dpg)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
