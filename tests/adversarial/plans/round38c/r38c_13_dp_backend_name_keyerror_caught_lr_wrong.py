"""Round 38c (dp 2, wrong): a KeyError (allowed by caught.py: "a lookup in the train file's own
containers") that only the capture raises: a scale table keyed by the group's backend name,
`_SCALE[dist.get_backend(group)]`; the real group is "gloo" (`n = 2.0`), the capture's group is
the fake process group (if its backend name is not "gloo": KeyError, `n = 1.0`).
Truth (torch4_truth.py FILE 1): w1 0.0070, w2 0.0093 (wrong: lr 0.2 in the real run).
Verdict (wip/r38 18debf8): **EQUIVALENT** (4 goals, 72 s): false accept R38c-6 (the capture's
group is torch's "fake" backend, world.py; KeyError is on caught.py's allowed list).
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


_SCALE = {"gloo": 2.0, "nccl": 2.0}


def _n(g):
    # WRONG: keyed by the backend's name, which the capture's fake group does not share
    try:
        return _SCALE[dist.get_backend(dist.group.WORLD)]
    except KeyError:
        return 1.0


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
