"""R42a: r41e_01 (``examples/torch/llama_pp_fsdp.py`` with ``Schedule1F1B``, the output head
halving its logits once its weight holds a gradient) reaching the gradient around
``AutogradStateGuard``: through the autograd graph of a tensor *derived* from the parameter
(``self.weight.view(-1).grad_fn.next_functions[0][0].variable.grad``), never touching a guarded
tensor's autograd state.

Idea: the guard checks only the first argument of a torch function against its guarded ids;
``view`` is an op (allowed), the view is a new tensor (not guarded), ``grad_fn`` /
``next_functions`` / ``AccumulateGrad.variable`` are no torch functions. For real (FSDP2, no
sync, parameters kept unsharded) micro-batch 1's forward reaches the unsharded leaf through its
``AccumulateGrad`` node, holding micro-batch 0's gradient: halved. The spec: a leaf without a
gradient (not halved). The stand-in: the view's node is ``GatherShard``'s backward, no
``variable``: the spec's branch.

Truth (pp_truth, gloo, float64): all 21 gradients wrong, max 0.0175 (``output.weight``),
update 6.0e-4 (17 s). Verdict (8dbe7a1): **EQUIVALENT**, 107 goals (110 s), with the stated
assumption "inside schedule.step nothing reads or writes the autograd state of the stage's
parameters (refused)": R42a-1.
"""

import sys
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


class Head(nn.Linear):
    """The output head; once its weight holds a gradient (an accumulation step after the
    first) the logits are halved (a stand-in for any rule keyed on "a gradient is there")."""

    def forward(self, x):
        y = F.linear(x, self.weight)
        node = self.weight.view(-1).grad_fn.next_functions[0][0]
        leaf = getattr(node, "variable", None)      # the AccumulateGrad node's parameter
        if leaf is not None and leaf.grad is not None:
            y = y * 0.5
        return y


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
