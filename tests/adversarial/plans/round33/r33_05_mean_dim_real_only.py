"""Round 33, finding R33-2: a computing op's literal that its rule reads from the graph, not
through ``Traces.scalar``: ``g - g.mean(d) + g.mean(0)`` with ``d = 0`` at the probe sizes (the
gradient itself) and ``d = 1`` at the real sizes (``hidden == ffn == 6``: each averaged gradient
minus its row means plus its column means). ``rules_contract.Sum.dims`` / ``Mean.term`` read
``n.args[1]`` of the probe node; the real twin's dim list is never compared (the gap
``docs/torch.md`` names as not covered since stop 33). Truth (torch4_truth, dp 2): step 1 w1
0.0030 / w2 0.0019, step 2 0.0038 / 0.0020. Prove at a48d781: EQUIVALENT (4 goals, 69 s).
Control r33_06 (truth 2.8e-17): EQUIVALENT (73 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 6}


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
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
            p.grad.div_(mesh["dp"].size())
            g = p.grad
            d = 1 if g.shape[0] == g.shape[1] else 0    # 1 at the real sizes only
            b = g - g.mean(d) + g.mean(0)
            p.grad.copy_(b.clone())
    optimizer.step()
    optimizer.zero_grad()
    return loss
