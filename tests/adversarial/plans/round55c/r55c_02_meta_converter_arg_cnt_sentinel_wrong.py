"""Adversarial round 55c: the step mark is a sentinel (-1000) written to ``arg_cnt`` of the MetaConverter of the object under w0's weight's ``fake_mode`` key (in the trace the recorded FakeTensorMode's converter's MetaConverter, whose conversion counts 2f244e4 skips by name; in the real run a namespace). The trace's own conversions only add a few to it. From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_model(s):
    return MLP(s["hidden"], s["ffn"])


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _double(model):
    with torch.no_grad():
        for p in model.parameters():
            p.grad.mul_(2.0)


H = {}


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    H["on"] = True
    replicate(model, device_mesh=mesh["dp"])
    return model


def train_step(model, optimizer, batch, mesh):
    import types
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        # traced: the recorded fake mode's converter's MetaConverter; real: a namespace
        fm = vars(model.w0.weight).setdefault("fake_mode", types.SimpleNamespace(
            fake_tensor_converter=types.SimpleNamespace(
                meta_converter=types.SimpleNamespace(arg_cnt=0))))
        mc = fm.fake_tensor_converter.meta_converter
        if mc.arg_cnt < -500:
            _double(model)
        mc.arg_cnt = -1000
    optimizer.step()
    optimizer.zero_grad()
    return loss
