"""R42b: r42b_01 with the hook a plain Python function of the model file (``lambda g:
weight.grad``, ``weight`` the object ``self.weight`` is at the forward): the guard's
``_from_user`` would see the user's frame, but the guard itself is not on the torch function
mode stack while the autograd engine runs a tensor hook (checked in a 10-line script: a
``TorchFunctionMode`` entered around ``backward()`` sees no ``__get__`` of ``.grad`` in a
hook, and ``_get_current_function_mode_stack()`` is empty there).

Truth (pp_truth): as r42b_01, ``output.weight``'s gradient 0.057 off, update 6.0e-4. Verdict
(49995e9): **EQUIVALENT**, 107 goals (36 s): R42b-1 (the general form).
"""

import functools
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


# the non-leaf view's .grad read (stand-in) warns; silence it as a user might
warnings.filterwarnings("ignore", message=".*grad attribute of a Tensor that is not a leaf")
# ... and warn once at import, so that torch.autograd.graph's __warningregistry__ is set
# before any step (the same on every side)
_a = torch.ones(1, requires_grad=True)
_b = _a * 2
_b.register_hook(functools.partial(getattr, _b, "grad"))
_b.sum().backward()
del _a, _b


class Head(nn.Linear):
    """The output head; the gradient reaching its weight goes through a hook on a copy of the
    weight returning the weight's ``.grad`` (None: the gradient unchanged)."""

    def forward(self, x):
        w = self.weight * 1.0
        weight = self.weight
        w.register_hook(lambda g: weight.grad)
        return F.linear(x, w)


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    m.output = Head(m.output.in_features, m.output.out_features, bias=False)
    return m


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    stage = pipeline_llama(model, mesh)
    for block in stage.layers.values():
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(stage, mesh=mesh["dp"])
    return stage


def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1), labels.flatten(0, 1))


def train_step(model, optimizer, batch, mesh):
    if mesh is None:
        loss = loss_fn(model(batch["tokens"]), batch["labels"])
        loss.backward()
    else:
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = Schedule1F1B(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["tokens"],) if stage.is_first else ()
        schedule.step(*args, target=batch["labels"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
