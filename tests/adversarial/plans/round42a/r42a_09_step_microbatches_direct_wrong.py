"""R42a: r41e_01 (``Schedule1F1B``; the output head halves its logits when
``self.weight.is_leaf and self.weight.grad is not None``: real FSDP2's micro-batch 1 forward
sees the unsharded leaf with micro-batch 0's gradient) with ``schedule.step``'s body written
out: the micro-batches split by hand and ``schedule._step_microbatches`` called directly.

Idea: ``AutogradStateGuard`` is entered by the front end's wrapper of
``PipelineScheduleSingle.step`` only; the schedule's own ``_step_microbatches`` runs the same
forwards, backwards and ``perform_reduce_grad``.

Truth (pp_truth, gloo, float64): all 21 gradients wrong, max 0.0175 (``output.weight``),
update 6.0e-4 (10 s). Verdict (8dbe7a1): **EQUIVALENT**, 107 goals (58 s): R42a-4 (r41e_01's
own read, the R41e-1 fix not entered).
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
        if self.weight.is_leaf and self.weight.grad is not None:
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
        n = N_MICROBATCHES              # schedule.step's body, its micro-batches split here
        args = [(t,) for t in batch["tokens"].chunk(n)] if stage.is_first else [()] * n
        stage.has_backward = True
        stage.clear_runtime_states()
        schedule._step_microbatches(args, [{}] * n, list(batch["labels"].chunk(n)), losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    return loss
