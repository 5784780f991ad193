"""Round 53a (tp 2, WRONG): ``tests/torch_frontend/dtensor_bugs/packed_tokens.py`` under the
faulty ``view`` rule of pytorch #179502 (``dtensor_faults.install_view_179502``), with the
sequence length a literal 2, so each rank's block of every sequence is ONE position (a local dim
of size 1 sharded over tp): the local pack ``x.view(-1, hidden)`` merges the unit block into
``seqs``. Wrong (the gathered stream interleaves the ranks' positions; the causal attention
mixes them): must not be EQUIVALENT."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "torch_frontend", "dtensor_bugs"))
import dtensor_faults  # noqa: E402

dtensor_faults.install_view_179502()

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

MESH = {"tp": 2}
SIZES = {"seqs": 2, "hidden": 6}   # seq is 2, a literal: one position per rank
DATA_SHARDING = {"x": {"tp": 1}}          # each rank its block of every sequence


class TokenMap(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.w = nn.Linear(h, h, bias=False)

    def forward(self, tokens):                # tokens: [seqs * seq, hidden]
        return self.w(tokens)


def build_model(s):
    return TokenMap(s["hidden"])


def make_batch(s):
    return {"x": torch.zeros(s["seqs"], 2, s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    parallelize_module(model, mesh["tp"], {"w": SequenceParallel(sequence_dim=0,
                                                                 use_local_output=False)})
    return model


def train_step(model, optimizer, batch, mesh):
    x = batch["x"]
    if mesh is not None:
        x = DTensor.from_local(x, mesh["tp"], [Shard(1)])
    tokens = x.view(-1, x.shape[-1])          # the sequences packed into one stream
    z = model(tokens)
    if isinstance(z, DTensor):
        z = z.full_tensor()
    q = z.unsqueeze(0).unsqueeze(0)           # [1, 1, seqs * seq, hidden]
    loss = (F.scaled_dot_product_attention(q, q, q, is_causal=True) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss
