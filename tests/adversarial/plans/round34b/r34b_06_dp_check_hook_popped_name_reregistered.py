"""Round 34b (dp 2, wrong): the check itself removed (R29-4 family: the train file reaches the
tracer). `get_proxy_mode().tracer.graph`'s instance attribute `create_node` (group_identity's
hook) is popped; then R33b-2: the dp name re-registered to a group of the rank alone for a
functional DDP over `mesh["dp"]`, given back after. No `if` on the capture: in a real run the
pop is from a dummy object's dict.
Truth (tests/adversarial/torch4_truth.py FILE 2): w1 0.0067, w2 0.010 after step 1
(0.0090 / 0.013 after step 2).
prove --torch at cd4b4e4: **EQUIVALENT** (4 goals by rewriting, 80 s): R34b-3 (R29-4 family:
the train file reaches the tracer), a false accept. Without the pop it is r33b_08's refusal
(exit 3) on dp 2."""
MESH = {"dp": 2}
import torch
import torch.distributed._functional_collectives as funcol
import torch.distributed as dist
from torch import nn
from torch.fx.experimental.proxy_tensor import get_proxy_mode

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


class _NoGraph:
    pass


def train_step(model, optimizer, batch, mesh):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:
        ws = mesh["dp"].size()
        # the graph's instance attribute `create_node` (the capture's check) removed; in a real
        # run there is no proxy mode and this pops from a dummy object's dict
        tracer = getattr(get_proxy_mode(), "tracer", None)
        vars(getattr(tracer, "graph", _NoGraph())).pop("create_node", None)
        c10d = torch._C._distributed_c10d
        singles = [dist.new_group([r]) for r in range(ws)]
        mine = singles[mesh.get_local_rank("dp")]
        dpg = mesh["dp"].get_group()
        name = dpg.group_name
        c10d._unregister_process_group(name)
        c10d._register_process_group(name, mine)     # WRONG: the dp name resolves to one rank
        for p in model.parameters():
            p.grad.copy_(funcol.all_reduce(p.grad, "sum", mesh["dp"]) / ws)
        c10d._unregister_process_group(name)
        c10d._register_process_group(name, dpg)      # given back
    optimizer.step()
    optimizer.zero_grad()
    return loss
