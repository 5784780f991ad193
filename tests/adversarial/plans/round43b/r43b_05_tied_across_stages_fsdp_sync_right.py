"""R43b: ``examples/torch/llama_pp_fsdp.py`` with the embedding and the output head tied
(``m.output.weight = m.tok_embeddings.weight``: stage 0 and stage 1 each hold a copy, both
``Shard(0)`` over dp, each its own step leaf) and the copies' gradients summed over pp after
``schedule.step`` by an all-reduce of the local shards (``gpt2_pp_tied.py``'s sync, FSDP2 form):
a right file. Idea: a parameter used by two stages, reduced by the stand-in per stage and then
by hand.

Truth (pp_truth, gloo, float64): right, grad 2.2e-16, update 1.1e-16 (25 s).
Verdict (7319f22): EQUIVALENT, 107 goals (82 rewrite, 25 reused), 162 s: sound, complete.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    m.output.weight = m.tok_embeddings.weight     # tied embedding / head (vocab, dim)
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
        # the tied weight's copies (first and last stage) sum their gradients over pp: both
        # are Shard(0) over dp with the same rows per dp rank, so the local shards add up
        w = model.tok_embeddings.weight if stage.is_first else model.output.weight
        dist.all_reduce(w.grad.to_local(), group=pp.get_group())
    optimizer.step()
    optimizer.zero_grad()
    return loss
