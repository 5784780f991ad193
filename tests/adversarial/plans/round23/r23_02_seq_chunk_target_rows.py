"""Round 23: a per-token MLP over (batch, seq, d) pipelined in 2 stages (GPipe, 2 micro-batches)
x dp 2, the user asking torch to cut the micro-batches along the sequence
(`args_chunk_spec=(TensorChunkSpec(1),)`), and the usual flattened LM loss
(`cross_entropy(pred.reshape(-1, V), y.reshape(-1))`). Torch always cuts the *target* along dim
0 (`schedules._TARGET_CHUNK_SPEC`), so micro-batch i's predictions (all rows, tokens of block i
of the sequence) are paired with the labels of block i of the *batch* (all tokens): the row
counts agree (B * T/2 == B/2 * T), so it runs, and trains on mismatched labels. Wrong."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.distributed.pipelining.microbatch import TensorChunkSpec

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 4, "seq": 4, "d": 8, "h": 16, "vocab": 12}
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
    return {"x": torch.zeros(s["batch"], s["seq"], s["d"]),
            "y": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def parallelize(model, mesh):
    return Stage(model, mesh["pp"].get_local_rank())


def loss_fn(pred, y):
    return F.cross_entropy(pred.reshape(-1, pred.shape[-1]), y.reshape(-1))


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn,
                                 args_chunk_spec=(TensorChunkSpec(1),))
        losses = []
        args = (batch["x"],) if stage.is_first else ()
        schedule.step(*args, target=batch["y"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
