"""R42a: the stated limit (parameter identity, ``docs/torch.md`` "Known limits") by
inference-style code: the output head caches ``tanh(self.weight)`` keyed on the weight
*object* (``cache[0] is not self.weight``), ``ScheduleGPipe``, 2 micro-batches.

Idea: real FSDP2 registers the same unsharded ``nn.Parameter`` for every micro-batch's forward,
so micro-batch 1 reuses micro-batch 0's cached ``tanh`` node; its backward runs twice (B0, B1).
The spec runs one forward; the stand-in gives each forward a new view (cache miss: the spec's
computation per micro-batch).

Truth (pp_truth, gloo, float64): every rank fails in B1, "Trying to backward through the
graph a second time" (20 s). Verdict (8dbe7a1): UNKNOWN (89 s), all 107 goals proved, open
only the step-state check ("the single-device step changes module output._cache ... and the
other does not"): sound, for that reason only (r42a_08 drops the cache: EQUIVALENT).
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
    return loss
