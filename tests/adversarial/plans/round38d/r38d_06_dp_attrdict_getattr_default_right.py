"""Round 38d (dp 2, right): a realistic config object, an `AttrDict` (a dict subclass whose
`__getattr__` turns a KeyError into AttributeError, as in many training repos), read with
`getattr(cfg, "grad_clip", None)` in the step: the AttributeError leaves the train file's
`__getattr__` (its function body is guarded: recorded) and `getattr` swallows it, in the real
run exactly as in the capture. The plan is right (no lr change).
Truth (torch4_truth.py FILE 1): w1 6e-17, w2 0 (right).
Verdict (wip/r38 ba967a7): exit 3 (15 s): "AttributeError (grad_clip) was raised through line 44"
(the AttrDict's `__getattr__` body guard): false refusal R38d-3.
"""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

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
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(s["batch"], s["hidden"], generator=g),
            "y": torch.randn(s["batch"], s["hidden"], generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model

class AttrDict(dict):
    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


CFG = AttrDict(lr=0.1)


def _n(g):
    clip = getattr(CFG, "grad_clip", None)   # the realistic idiom: a default for an unset key
    return 1.0 if clip is None else 1.0


def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
        optimizer.param_groups[0]["lr"] = 0.1 * _n(model.w1.weight.grad)
    optimizer.step()
    optimizer.zero_grad()
    return loss
