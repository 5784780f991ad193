"""R43a: design 43's open gap (1), a storage write reached from code the autograd engine runs,
on a unit that reshards between micro-batches. Each transformer block registers, in its
forward, a tensor hook on its input that zeroes its own ``feed_forward.w2.weight`` through
``.data`` once the block's backward is done (a reset; idempotent, so once per micro-batch is
as once; ``clamp_``, the first try, has no lowering rule: UNKNOWN). The hook reaches the
parameter the optimizer holds (``build_optimizer`` stores it on the block: there the module
holds the sharded parameter).

Single device: the hook fires once per block after that block's backward: every gradient
uses the original weight, the step updates the zeroed one. Stand-in (one leaf per step): the
hook zeroes the stored shard (``.data``: no version counter bumps, and the guard is not on
the mode stack in the engine); the leaf gathered at the first forward keeps the original
values for every micro-batch: the spec's numbers. Real FSDP2 (torch 2.13, measured with
prints in each rank): on the last stage, torch's metadata-inference pass
(``_forward_metadata_inference`` / ``_backward_metadata_inference``, run at the first
``schedule.step``) runs the block's forward and a backward that fires the hook, which zeroes
the shard; every later forward re-gathers it (``reshard_after_forward`` True for a non-root
unit; also after B0, F1 all-gathers again): the micro-batches' forwards run with ``w2 = 0``.

Truth (pp_truth): wrong, ``layers.1.feed_forward.w3.weight``'s gradient 6.1e-3 off,
``output.weight``'s 5.3e-3, updates 6.0e-4 (the ``clamp_`` form: 3.4e-3 / 3.3e-3). Verdict
(7319f22): **EQUIVALENT**, 107 goals (162 s): R43a-1 (the ``clamp_`` form: UNKNOWN, 86 goals,
0 refuted, open only for ``aten.clamp_`` not lowered).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

import llama_model
from llama_model import ModelArgs, Transformer
from llama_pipeline import pipeline_llama

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2


class ClampedBlock(llama_model.TransformerBlock):
    """A block whose ``w2`` is zeroed once its backward is done."""

    def forward(self, x, cos, sin):
        targets = getattr(self, "zero_targets", [])
        if x.requires_grad:
            x.register_hook(lambda g: [t.data.zero_() for t in targets] and None)
        return super().forward(x, cos, sin)


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    m = Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                              n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                              ffn_hidden=s["ffn"], max_seq_len=s["seq"]))
    for blk in m.layers.values():
        blk.__class__ = ClampedBlock
    return m


def make_batch(s):
    return {"tokens": torch.zeros(s["batch"], s["seq"], dtype=torch.long),
            "labels": torch.zeros(s["batch"], s["seq"], dtype=torch.long)}


def build_optimizer(model):
    for blk in model.layers.values():    # the parameters the optimizer holds
        blk.zero_targets = [blk.feed_forward.w2.weight]
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
