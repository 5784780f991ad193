"""Round 34b (dp 2, right): r34b_04's control: the same hand-written DDP (the loss divided
by |dp|, one all-reduce per gradient) and the same `disable_proxy_modes_tracing()` block,
empty.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0, w2 2.8e-17 (both steps).
prove --torch at cd4b4e4: EQUIVALENT (4 goals by rewriting, 28 s): right."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

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
        with disable_proxy_modes_tracing():     # a no-op outside a trace
            pass                                # right: nothing hidden
    optimizer.step()
    optimizer.zero_grad()
    return loss
