"""Round 34b (dp 2 x tp 2, right): r34b_01's control: the same `_register_backend` call, the
dp group object given its own cpu backend again. Hand-written DDP over dp.
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0, w2 2.8e-17.
prove --torch at cd4b4e4: EQUIVALENT (4 goals, 83 s): right. A fix that refuses any
`_register_backend` by the train file may turn this into a refusal, which is acceptable."""
MESH = {"dp": 2, "tp": 2}
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
        dpg, tpg = mesh["dp"].get_group(), mesh["tp"].get_group()
        cpu = torch.device("cpu")
        # right: the dp group object's cpu backend re-registered as itself
        dpg._register_backend(cpu, dist.ProcessGroup.BackendType.UCC, dpg._get_backend(cpu))
        for p in model.parameters():
            dist.all_reduce(p.grad, group=dpg)
            p.grad.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
