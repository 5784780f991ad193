"""Round 36b (dp 2, right): DDP's `gradient_as_bucket_view` with gradient accumulation. After the
first micro-batch the gradients are flattened into `flat` and made views of it; the second
micro-batch's backward accumulates into the views in place (AccumulateGrad's `grad += new`);
then one all-reduce and `div_` of the whole bucket. Each micro-batch loss is halved (both
micro-batches are the local batch: `chunk(2)` of it is refused, its sizes move with the sizes).
Truth (tests/adversarial/torch4_truth.py FILE 1), step 1: w1 1.7e-18 / w2 0.0 (right).
prove --torch (round 36b, main 0a8840e): UNKNOWN (34 s): `aten.add_` (the second backward's
accumulation into the views) "an in-place write through a slice of a tensor that is read again":
false refusal R36b-3. A first draft splitting the local batch with `chunk(2)`: exit 3 (32 s,
"aten.split.Tensor takes other entries at the real sizes")."""
MESH = {"dp": 2}
import torch
import torch.distributed as dist
from torch import nn

SIZES = {"batch": 8, "hidden": 6}


class MLP(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w1 = nn.Linear(h, h, bias=False)
        self.w2 = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)))


def build_model(s):
    return MLP(s["hidden"])


def make_batch(s):
    return {"x": torch.zeros(s["batch"], s["hidden"]), "y": torch.zeros(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    return model


def _views(flat, ps):
    a = 0
    for p in ps:
        b = a + p.numel()
        p.grad = flat[a:b].view_as(p)
        a = b


def _loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = _loss(model, batch["x"], batch["y"])
        loss.backward()
    else:
        ps = [model.w1.weight, model.w2.weight]
        xs, ys = [batch["x"]] * 2, [batch["y"]] * 2     # two micro-batches (the same data)
        loss = _loss(model, xs[0], ys[0]) / 2
        loss.backward()
        flat = torch.cat([p.grad.view(-1) for p in ps])
        _views(flat, ps)
        l2 = _loss(model, xs[1], ys[1]) / 2
        l2.backward()                 # accumulates into the views of flat, in place
        loss = loss + l2
        dist.all_reduce(flat, group=mesh["dp"].get_group())
        flat.div_(mesh["dp"].size())
    optimizer.step()
    optimizer.zero_grad()
    return loss
