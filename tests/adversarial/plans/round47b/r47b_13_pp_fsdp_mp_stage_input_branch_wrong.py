"""47b: examples/torch/llama_pp_fsdp.py with mp_policy bf16 on every block and the stage
(the stage root with cast_forward_inputs=False): stage 1 receives stage 0's bf16 hidden states
and doubles them when bf16: wrong for real if the pipeline hands them over in bf16."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "torch"))

import torch
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from llama_model import ModelArgs, Transformer
from llama_pipeline import LlamaStage

MESH = {"pp": 2, "dp": 2}
SIZES = {"batch": 8, "seq": 16, "n_kv_heads": 2, "n_rep": 2, "head_dim": 8, "ffn": 48,
         "vocab": 64}
N_MICROBATCHES = 2
BF = torch.bfloat16


class Stage(LlamaStage):
    def forward(self, h):
        if self.tok_embeddings is None and h.dtype == BF:
            h = h * 2
        return super().forward(h)


def build_model(s):
    heads = s["n_kv_heads"] * s["n_rep"]
    return Transformer(ModelArgs(dim=heads * s["head_dim"], n_layers=2, n_heads=heads,
                                 n_kv_heads=s["n_kv_heads"], vocab_size=s["vocab"],
                                 ffn_hidden=s["ffn"], max_seq_len=s["seq"]))


def make_batch(s):
    g = torch.Generator().manual_seed(0)
    return {"tokens": torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g),
            "labels": torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=g)}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed.fsdp import fully_shard
    stage = Stage(model, mesh["pp"].get_local_rank(), mesh["pp"].size())
    for block in stage.layers.values():
        fully_shard(block, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(param_dtype=BF))
    fully_shard(stage, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(
        param_dtype=BF, cast_forward_inputs=False))
    return stage


def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1).to(torch.get_default_dtype()), labels.flatten(0, 1))


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
