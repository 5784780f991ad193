"""Round 34b (dp 2 x tp 2, right): r34b_07's control: the same registry calls in
`parallelize`, the dp name re-registered to the dp group itself. FSDP2 over `mesh["dp"]`.
Truth (tests/adversarial/tp_truth.py FILE): w1 0.0, w2 2.8e-17.
prove --torch at cd4b4e4: EQUIVALENT (4 goals, 77 s): right. A fix that refuses any registry
write in `parallelize` may turn this into a refusal, which is acceptable."""
import torch
from torch import nn
from torch.distributed.fsdp import fully_shard

MESH = {"dp": 2, "tp": 2}
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
    c10d = torch._C._distributed_c10d
    dp = mesh["dp"]
    name = dp.get_group().group_name
    dpg, tpg = dp.get_group(), mesh["tp"].get_group()
    c10d._unregister_process_group(name)
    c10d._register_process_group(name, dpg)     # right: the dp name kept on dp
    fully_shard(model.w1, mesh=dp)
    fully_shard(model.w2, mesh=dp)
    fully_shard(model, mesh=dp)
    c10d._unregister_process_group(name)
    c10d._register_process_group(name, dpg)     # given back before the step
    return model


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
