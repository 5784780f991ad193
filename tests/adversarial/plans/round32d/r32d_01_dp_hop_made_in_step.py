"""Round 32d (dp 2): r32b_02's wrong division (the all-reduced gradient left summed) through a
HigherOrderOperator made in the step, not an OpOverload: a HOP dispatches in Python always (no
Python dispatcher to enable, so _log_python_dispatcher sees nothing), its py_kernels[CPU]
returns the gradient undivided, and its python_key_table entries for the capture's
ProxyTorchDispatchMode / FakeTensorMode divide under the mode (traced as a plain aten.div_).
After use the HOP is popped from torch._ops._higher_order_ops and its tables cleared, so the
post-step gc scan (_python_kernels) finds no kernel.
Truth (torch4_truth.py FILE 2): update w1 0.0070, w2 0.0093; step 2 0.0086 / 0.012.
At 52ab29b: EQUIVALENT (4 goals, 43 s)."""

import torch
import torch.distributed as dist
from torch import nn

MESH = {"dp": 2}
SIZES = {"batch": 8, "hidden": 6, "ffn": 10}


from torch._ops import HigherOrderOperator, _higher_order_ops  # noqa: E402
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

_K = torch._C.DispatchKey


def _make_div():
    """A HigherOrderOperator made in the step: its CPU kernel leaves the gradient summed; under
    the capture's modes (Python key) it divides."""

    class _Div(HigherOrderOperator):
        def __init__(self):
            super().__init__("r32d_div")

        def __call__(self, g, n):
            return super().__call__(g, n)

    hop = _Div()

    @hop.py_impl(_K.CPU)
    def _cpu(g, n):
        return g

    @hop.py_impl(_K.Autograd)
    def _autograd(g, n):
        with torch._C._AutoDispatchBelowAutograd():
            return hop(g, n)

    def _mode(mode, g, n):
        with mode:
            return g.div_(n)

    hop.python_key_table[ProxyTorchDispatchMode] = _mode
    hop.python_key_table[FakeTensorMode] = _mode
    return hop


def _forget(hop):
    _higher_order_ops.pop("r32d_div", None)
    for t in ("py_kernels", "python_key_table", "functorch_table", "_dispatch_cache"):
        getattr(hop, t, {}).clear()


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
        pg = mesh["dp"].get_group()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=pg)
        hop = _make_div()
        for p in model.parameters():
            hop(p.grad, mesh["dp"].size())
        _forget(hop)
    optimizer.step()
    optimizer.zero_grad()
    return loss
