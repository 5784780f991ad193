"""Round 32, R32-5 false refusal (dp 2), right: r32_02 (hand-written DDP: all_reduce, then
torch._foreach_div_) whose loss is the mean of per-sample losses computed with torch.vmap. The
first vmap call of a process (torch.func.vmap, torch.vmap, also flex_attention's eager path)
registers torch's own FuncTorchBatched kernels of eight aten ops
(torch/_functorch/predispatch.py lazy_load_decompositions: Library("aten", "IMPL",
"FuncTorchBatched"), line 155), which dispatcher_guard.kernel_changes counts as a change of an
existing operator's kernel whoever registers it. Right: truth (torch4_truth.py FILE 2) 0.0 /
2.8e-17. Refused at ddc6b7a, exit 3 (27 s): "the train file changes torch's operator kernels
after the step: aten::addr's FuncTorchBatched kernel registered at .../predispatch.py:155 (and 7
more)"; EQUIVALENT at 853d73d, the commit before (4 goals, 31 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
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
    per_sample = torch.vmap(lambda o, y: ((o - y) ** 2).mean())(model(batch["x"]), batch["y"])
    loss = per_sample.mean()
    loss.backward()
    if mesh is not None:
        pg = mesh["dp"].get_group()
        grads = [p.grad for p in model.parameters()]
        for g in grads:
            dist.all_reduce(g, group=pg)
        torch._foreach_div_(grads, mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
