"""Round 23: torch's receive buffers are allocated once, when the schedule's metadata is
inferred (`_setup_forward_recv_info`: one `empty_strided` per micro-batch), and reused by every
later `schedule.step` on that schedule: the k-th step's micro-batch-0 activation is received
*in place* into the buffer the first step's was. The last stage keeps its received activation
detached (`h.detach()`: a view, sharing the buffer's storage); train_step runs a second, diagnostic step
with stage 0's output scaled by 2 whose gradients it throws away (the gradients are saved after the first step
and restored), then adds a term of the first step's kept activations to `l1.bias`'s gradient.
For real, the view aliases the buffer, so after the second step it holds the second step's
activation (2 tanh(l0(x)), not tanh(l0(x))). `pp_merge` composes a receive as "the buffer's later
readers read the value sent" (`env[buffer] = clone of the k-th send`), which re-points later
reads of the *buffer* but not of a view taken before the receive: the view keeps reading the
first step's value (the c10d-op rule "an alias taken before the call is UNKNOWN" is bypassed).
Wrong for real: grad:l1.bias differs."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


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
        self.rows = []
        self.mult = 1.0

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h)) * self.mult
        if self.l1 is not None:
            self.rows.append(h.detach())     # the received activation, kept (shares its storage)
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
        with torch.no_grad():
            model.l1.bias.grad.add_(0.01 * torch.tanh(model.l0(batch["x"])).sum())
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)
        losses = []
        schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                      losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
        saved = [p.grad.clone() for p in model.parameters()]
        # a diagnostic pass with stage 0's output scaled, its gradients thrown away
        model.mult = 2.0
        schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                      losses=[])
        model.mult = 1.0
        with torch.no_grad():
            for p, g in zip(model.parameters(), saved):
                p.grad.copy_(g)
            if stage.is_last:
                # rows[0]: torch's metadata forward; [1], [2]: the first step's micro-batches
                model.l1.bias.grad.add_(0.01 * (model.rows[1].sum() + model.rows[2].sum()))
        model.rows.clear()
    optimizer.step()
    optimizer.zero_grad()
    return loss
