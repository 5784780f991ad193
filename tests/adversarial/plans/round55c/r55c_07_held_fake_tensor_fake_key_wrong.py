"""Adversarial round 55c: a held fake tensor C (made in ``build_optimizer``: fake in the trace) gets the step mark under ``_unique_consecutive_memo_epoch``, one of the keys a fresh FakeTensor has (``step_state._fake_keys``: skipped whatever it holds, R54b-2's class on a held tensor; in the real run a plain attribute of a real tensor). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
MESH = {"dp": 2}
import copy
import torch
from torch import nn

SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w0 = nn.Linear(h, h, bias=False)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(torch.tanh(self.w0(x)))))


H = {}
_SET_DATA = torch._C.TensorBase.data.__set__


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    # traced: built on the tracer's fake parameters, so C is a fake tensor (w0's shape)
    H["C"] = torch.zeros_like(model.w0.weight, requires_grad=False)
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        # traced: C is fake and the key one of a FakeTensor's own (skipped whatever it holds);
        # real: a plain attribute of a real tensor
        d = vars(H["C"])
        if d.get("_unique_consecutive_memo_epoch") == -1000:
            _double(model)
        d["_unique_consecutive_memo_epoch"] = -1000
    optimizer.step()
    optimizer.zero_grad()
    return loss
