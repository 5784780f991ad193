"""Adversarial round 56e: the step counter is an attribute set on ``tempfile._name_sequence._rng`` (a ``random.Random``, this process's pid in ``_rng_pid``): R56d-4's fix exempts the name sequence while ``type(_rng) is random.Random``, whatever ``_rng`` holds; ``_rng.r56e = n + 1`` each step is the user's state (as R14-3's flag on the sequence itself). From the second step on the parallel run doubles its gradients. Must not be EQUIVALENT."""
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
    import tempfile
    x, y = batch["x"], batch["y"]
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if "on" in H:
        rng = tempfile._name_sequence.rng
        n = getattr(rng, "r56e", 0)
        if n:
            _double(model)
        rng.r56e = n + 1
    optimizer.step()
    optimizer.zero_grad()
    return loss


import tempfile as _tempfile  # noqa: E402
_tempfile._get_candidate_names().rng  # made, with this process's pid
