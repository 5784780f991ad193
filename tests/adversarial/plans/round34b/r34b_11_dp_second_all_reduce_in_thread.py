"""Round 34b (dp 2, wrong): R34b-2 without any torch-internal API: the second all-reduce of
every gradient runs in a `threading.Thread` (started and joined in the step). make_fx's
modes are thread-local: in the other thread the fake tensors run their fake kernels and no
node is recorded; the real run sums the gradients twice.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0070, w2 0.0093 after step 1
(0.0086 / 0.012 after step 2).
prove --torch at cd4b4e4: **EQUIVALENT** (4 goals by rewriting, 28 s): R34b-2 with no torch
internal API, a false accept. Control: r34b_10 (EQUIVALENT, 28 s)."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
import threading

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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        def again():
            for p in model.parameters():
                dist.all_reduce(p.grad, group=mesh["dp"].get_group())   # WRONG: summed twice

        t = threading.Thread(target=again)
        t.start()
        t.join()
    optimizer.step()
    optimizer.zero_grad()
    return loss
