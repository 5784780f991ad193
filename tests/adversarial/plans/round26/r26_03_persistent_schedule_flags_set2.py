"""Round 26: R26-1 (false accept): r26_02 with stage 1's `grad_send_info` set too (the list torch
builds in step 1). The fingerprint sees no change; the schedule's private `_stage_*_initialized`
flags and the reused receive buffers (with their hooks) are not read. EQUIVALENT, while step 2
runs each hook twice (truth: step 1 exact, step 2 grad:l0.weight 0.029).

The base (r26_01): the schedule is built once, in parallelize (as torchtitan does), and kept on
the stage module; train_step only calls schedule.step. The last stage halves the gradient of its
received activation with a tensor hook (`h.register_hook`), as the single-device model halves
the gradient of its hidden activation. The received activation *is* torch's receive buffer (a
leaf, `_retrieve_recv_activations`), allocated once per metadata inference and reused by every
later step: in step 2 each buffer carries the hook of step 1 and of step 2 (quartered), while in
the traced step 1 it carries one (right). Also: step 1 runs torch's metadata inference (an extra
forward, an extra loss_fn call), step 2 does not."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

MESH = {"pp": 2}
SIZES = {"batch": 8, "d": 8, "h": 16, "vocab": 12}


def _half(g):
    return g * 0.5


class MLP(nn.Module):
    def __init__(self, d, h, v):
        super().__init__()
        self.l0 = nn.Linear(d, h)
        self.l1 = nn.Linear(h, v)

    def forward(self, x):
        h = torch.tanh(self.l0(x))
        h.register_hook(_half)
        return self.l1(h)


class Stage(nn.Module):
    def __init__(self, model, stage):
        super().__init__()
        self.l0 = model.l0 if stage == 0 else None
        self.l1 = model.l1 if stage == 1 else None

    def forward(self, h):
        if self.l0 is not None:
            h = torch.tanh(self.l0(h))
        if self.l1 is not None:
            if h.requires_grad:
                h.register_hook(_half)
            h = self.l1(h)
        return h


def build_model(s):
    return MLP(s["d"], s["h"], s["vocab"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["d"]), "y": torch.zeros(s["batch"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def loss_fn(pred, y):
    return F.cross_entropy(pred, y)


def parallelize(model, mesh):
    pp = mesh["pp"]
    st = Stage(model, pp.get_local_rank())
    stage = PipelineStage(st, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                          group=pp.get_group())
    st.pipe = [stage, ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)]
    stage.has_backward, stage.chunks = True, 2    # as schedule.step sets them
    if not stage.is_first:
        stage.grad_send_info = [stage.stage_index - 1]
    return st


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    else:
        stage, schedule = model.pipe
        losses = []
        schedule.step(*((batch["x"],) if stage.is_first else ()), target=batch["y"],
                      losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
