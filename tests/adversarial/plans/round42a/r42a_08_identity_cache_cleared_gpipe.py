"""R42a: r42a_05 (the output head caches ``tanh(self.weight)`` keyed on the weight *object*,
``ScheduleGPipe``) with the cache dropped at the end of ``train_step`` (a per-step cache), so
the steps leave the same state: the stated identity limit (``docs/torch.md``, "Known limits")
reached with nothing else in the way.

Idea: real FSDP2 registers the same unsharded ``nn.Parameter`` for both micro-batches'
forwards: micro-batch 1 reuses micro-batch 0's ``tanh`` node, whose saved output B0's backward
frees; B1 backwards through it again. The spec (one forward) and the stand-in (a new view per
forward: a cache miss each time) compute the spec's step.

Truth (pp_truth, gloo, float64): the single-device step runs; every rank fails in B1, "Trying
to backward through the graph a second time" (13 s). Verdict (8dbe7a1): **EQUIVALENT**, 107
goals (64 s), its assumptions saying "nor compares them by identity": R42a-3 (the stated
limit, reached by a per-step identity-keyed cache).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


class Head(nn.Linear):
    """The output head, computing its effective weight (a smooth clamp) once per weight object:
    an identity-keyed cache, as inference code caches a transformed weight."""

    def forward(self, x):
        cache = self.__dict__.setdefault("_cache", [None, None])
        if cache[0] is not self.weight:
            cache[:] = [self.weight, torch.tanh(self.weight)]
        return F.linear(x, cache[1])


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
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        losses = []
        args = (batch["tokens"],) if stage.is_first else ()
        schedule.step(*args, target=batch["labels"], losses=losses)
        loss = torch.stack(losses).mean() if stage.is_last else None
    optimizer.step()
    optimizer.zero_grad()
    for m in model.modules():                   # the cache lives for one step
        m.__dict__.pop("_cache", None)
    return loss
