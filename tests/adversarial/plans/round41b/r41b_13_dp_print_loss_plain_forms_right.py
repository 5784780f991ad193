"""Round 41b (dp 2, right): `print(loss)`, `print(f"{loss}")`, `print("loss", loss.item())`,
`print(f"loss {loss.item():.3f}", flush=True)` at the end of the step.
Truth (torch4_truth FILE 2): w1 5.6e-17, w2 0 after step 1 (5.6e-17 / 5.6e-17 after step 2):
right.
prove --torch at a323fd2: **exit 3** (53 s) at line 48, `print(f"{loss}")`: "the step reads a
value of its fake tensors (t.__str__) ... a step that catches the error takes another branch"
(no try in the file): a false refusal (R41b-5). `print(loss)` (line 47) passed; lines 49-50 not
reached.
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

def train_step(model, optimizer, batch, mesh):
    ws = mesh["dp"].size() if mesh is not None else 1
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean() / ws
    loss.backward()
    if mesh is not None:
        for p in model.parameters():
            dist.all_reduce(p.grad, group=mesh["dp"].get_group())
    optimizer.step()
    optimizer.zero_grad()
    print(loss)
    print(f"{loss}")
    print("loss", loss.item())
    print(f"loss {loss.item():.3f}", flush=True)
    return loss
