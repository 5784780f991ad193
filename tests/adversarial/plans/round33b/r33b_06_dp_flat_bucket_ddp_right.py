"""Round 33b (dp 2, right): a bucketed hand-written DDP: the gradients flattened into one buffer
(`torch.cat`), one all-reduce, one division, copied back slice by slice
(`p.grad.copy_(flat[a:b].view_as(p))`).
Truth (tests/adversarial/torch4_truth.py FILE 2): <= 2.8e-17. prove --torch at f2928c8:
UNKNOWN (66 s, "aten.cat.default ... cat along a dim that is a product of named dims"): a false
refusal of a common pattern (DDP's flat buckets), not from R32d-4's fix."""
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
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        ps = list(model.parameters())
        flat = torch.cat([p.grad.view(-1) for p in ps])
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
        a = 0
        for p in ps:
            b = a + p.numel()
            p.grad.copy_(flat[a:b].view_as(p))
            a = b
    optimizer.step()
    optimizer.zero_grad()
    return loss
