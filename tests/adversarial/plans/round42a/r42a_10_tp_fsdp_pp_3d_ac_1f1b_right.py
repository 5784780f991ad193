"""R42a: r42a_04 (torchtitan's 3-D: pp 2 x dp 2 x tp 2, TP + SP, FSDP2 on blocks and stage)
with full activation checkpointing of every block (``checkpoint_wrapper``, applied at build so
the single-device names match; TP on the wrapped blocks) and ``Schedule1F1B``: a right file
(false refusal hunt: the recomputation of TP x FSDP blocks under the guard, forwards after
backwards).

Truth (pp_truth, gloo, 8 processes, float64): right, grad 4.2e-17, update 4.8e-16 (21 s).
Verdict (8dbe7a1): EQUIVALENT, 107 goals (158 s): no false refusal.
"""

import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

from llama_model import ModelArgs, Transformer
from llama_parallelize import apply_ac
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2, "tp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 4, "n_rep": 2, "head_dim": 4, "ffn": 64,
         "vocab": 64}
N_MICROBATCHES = 2


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    apply_ac(m, "full")     # torchtitan's apply_ac (here at build: the spec's names match)
    return m


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    from llama_parallelize import apply_tp_blocks
    stage = pipeline_llama(model, mesh)
    plan = {}                       # torchtitan's apply_tp, on the modules this stage holds
    if stage.tok_embeddings is not None:
        plan["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(),
                                                 output_layouts=Shard(1))
    if stage.output is not None:
        plan["norm"] = SequenceParallel()
        plan["output"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    parallelize_module(stage, mesh["tp"], plan)
    inner = {k: b._checkpoint_wrapped_module for k, b in stage.layers.items()}
    apply_tp_blocks(types.SimpleNamespace(layers=inner), mesh["tp"])
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
