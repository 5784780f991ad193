"""Round 31, R31-1 (dp 2, rank 1 a 1 s straggler): r30c_01 without any mode.
torch.Tensor.is_complex (asked by dist.all_reduce after the capture's guard and before
group.allreduce; replaced for the loop and deleted after it, as r30c_02) sets
torch._C._distributed_c10d.Work.wait to a no-op that puts the very original back; the train
file also puts it back after each call. dist.all_reduce's work.wait() then waits nothing (gloo
reduces in the background; rank 0 divides and steps with its own gradient). No node is
recorded while train-file code is on the stack (op_guard.watching sees nothing); op_guard.
tampered does not look at Work; pp_guard's snapshot of Work.wait is compared before the call
and when the step returned, never inside it (identical then). Wrong: truth (torch4_truth.py
FILE 2) update w1 0.0067, w2 0.010; step 2 0.0074 / 0.013 (control r31_02: 5.6e-17).
EQUIVALENT at 0f22574 (4 goals, 36 s)."""

import time

import torch
import torch.distributed as dist
from torch import nn

W = torch._C._distributed_c10d.Work
MESH = {"dp": 2}
LATE = 1.0
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
        if dist.get_rank() == 1:
            time.sleep(LATE)            # a straggler
        pg = mesh["dp"].get_group()
        orig_wait = W.__dict__["wait"]
        orig = torch.Tensor.is_complex

        def no_wait(self, *a, **k):     # runs as dist.all_reduce's work.wait()
            W.wait = orig_wait          # the very object again
            return True

        def is_complex(self):       # called by dist.all_reduce before group.allreduce
            W.wait = no_wait
            return orig(self)

        torch.Tensor.is_complex = is_complex
        try:
            for p in model.parameters():
                dist.all_reduce(p.grad, group=pg)   # its wait waits nothing
                W.wait = orig_wait          # (the trace's work is not waited by it)
        finally:
            del torch.Tensor.is_complex      # inherited from TensorBase again
            W.wait = orig_wait
        for p in model.parameters():
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
