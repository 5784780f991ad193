"""Round 36c (dp 2 x tp 2, wrong): R36c-1 without `new_group` in the train file: the hook on
`ProcessGroupGloo.__init__` is set when the file is imported and crosses the *mesh's* dp groups
([0, 2] and [1, 3], made by `init_device_mesh` in the real run) on ranks 2 and 3. The capture's
mesh is torch's fake backend: gloo is never constructed there. The MLP of r36c_01 (column /
row-parallel DTensor weights, all-reduce over tp, hand-written DDP over the mesh's dp group).
Truth (tp_truth): w1 0.0078 / w2 0.0069 (ranks 0, 1), w1 0.0067 / w2 0.0076 (ranks 2, 3).
prove --torch at 072d231: **EQUIVALENT** (4 goals, 128 s): a false accept (R36c-1). First forms: the
hook left in place, exit 3 (27 s, "torch's pipelining was modified ... ProcessGroupGloo.__init__
is not torch's own"); restored in `parallelize` only, UNKNOWN (143 s, step-state: the
single-device capture never ran it). Restored in `build_model`, which the real run calls after
the mesh is made.
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

MESH = {"dp": 2, "tp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}
_G = {}


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.w1 = nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    _G.pop("restore", lambda: None)()   # the mesh is made (real run): torch's constructor back
    return MLP(s["hidden"], s["ffn"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def _crossed_gloo():
    # WRONG, set when the file is imported: every gloo backend made later on ranks 2 and 3 for
    # a group of ranks [0, 2] / [1, 3] (the mesh's dp groups, made by init_device_mesh in the
    # real run) meets under the other dp group's name (sequential: n and n + 1)
    import os
    import sys
    from torch.distributed import distributed_c10d as c10d
    gloo = c10d.ProcessGroupGloo
    init = gloo.__init__
    shift = {(2, (0, 2)): 1, (3, (1, 3)): -1}

    def crossed(self, store, *a, **k):
        f = sys._getframe(1).f_locals
        key = (int(os.environ.get("RANK", "-1")), tuple(f.get("global_ranks_in_group") or ()))
        if key in shift and str(f.get("group_name", "")).isdigit():
            name = f"{int(f['group_name']) + shift[key]}/"
            store = c10d.PrefixStore("cpu/", c10d.PrefixStore(
                name, store.underlying_store.underlying_store))
        init(self, store, *a, **k)

    gloo.__init__ = crossed
    _G["restore"] = lambda: setattr(gloo, "__init__", init)


_crossed_gloo()


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's reduce-from-model-parallel region: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x, group=_G["tp"])
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def parallelize(model, mesh):
    tp = mesh["tp"]
    model.w1.weight = nn.Parameter(distribute_tensor(model.w1.weight.detach(), tp, [Shard(0)]))
    model.w2.weight = nn.Parameter(distribute_tensor(model.w2.weight.detach(), tp, [Shard(1)]))
    _G["tp"], _G["dp"] = tp.get_group(), mesh["dp"].get_group()
    return model


def train_step(model, optimizer, batch, mesh):
    x = batch["x"]
    if mesh is None:
        out = model(x)
    else:   # column-parallel w1, row-parallel w2, all-reduce of the partial output over tp
        w1, w2 = model.w1.weight.to_local(), model.w2.weight.to_local()
        out = _ReduceFromTP.apply(nn.functional.silu(x @ w1.t()) @ w2.t())
    loss = ((out - batch["y"]) ** 2).mean()
    loss.backward()
    if mesh is not None:   # hand-written DDP over the dp group of each tp-local gradient block
        g = _G["dp"]
        for p in model.parameters():
            grad = p.grad.to_local()
            dist.all_reduce(grad, group=g)
            grad.div_(dist.get_world_size(group=g))
    optimizer.step()
    optimizer.zero_grad()
    return loss
