"""Idea (round 49d): a forward hook on each block registered before fully_shard returns o * 1.0 with a tensor hook that doubles the gradient when the block's kept w2 weight has storage size 0. For real that tensor hook runs before FSDP2's pre-backward hook (registered later on the same tensor): the memory is still freed, the gradient doubled: wrong."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

import llama_model
from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2
SEEN = []
PAR = []
STEP = []


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    for blk in m.layers.values():
        keep = []
        blk.feed_forward.w2.register_forward_hook(lambda mod, a, o, keep=keep: keep.append(mod.weight))

        def bh(mod, a, o, keep=keep):
            o = o * 1.0
            if PAR:
                o.register_hook(lambda g, keep=keep: g * 2 if freed(keep[-1]) else g)
            return o
        blk.register_forward_hook(bh)
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


def freed(t):
    return PAR and t.untyped_storage().size() == 0


def loss_fn(pred, labels):
    loss = F.cross_entropy(pred.flatten(0, 1), labels.flatten(0, 1))
    return loss


def train_step(model, optimizer, batch, mesh):
    SEEN.clear()
    PAR.clear()
    STEP.clear()
    if mesh is None:
        for _ in range(1):
            STEP.append(1)
            loss = loss_fn(model(batch["tokens"]), batch["labels"])
            loss.backward()
    else:
        PAR.append(1)
        pp = mesh["pp"]
        stage = PipelineStage(model, pp.get_local_rank(), pp.size(), torch.device("cpu"),
                              group=pp.get_group())
        schedule = ScheduleGPipe(stage, n_microbatches=N_MICROBATCHES, loss_fn=loss_fn)
        for _ in range(1):
            STEP.append(1)
            losses = []
            args = (batch["tokens"],) if stage.is_first else ()
            schedule.step(*args, target=batch["labels"], losses=losses)
            loss = torch.stack(losses).mean() if stage.is_last else None

    SEEN.clear()
    PAR.clear()
    STEP.clear()
    optimizer.step()
    optimizer.zero_grad()
    return loss
