"""A train file that views a ``Shard(1)`` DTensor (the situation of pytorch #179502): under
sequence parallelism each rank holds its block of every sequence, wraps it as a DTensor
``x: [seqs, seq, hidden]`` sharded on ``seq`` (``Shard(1)``) and packs the sequences into one
token stream, ``x.view(-1, hidden)``; a position-wise linear runs on the token shards
(``SequenceParallel(sequence_dim=0)``), the stream is gathered and a causal attention over the
packed stream gives the loss.

A rank's sequence block is not a block of the packed stream: torch 2.13's rule records the
interleaving as ``_StridedShard(0, split_factor=seqs)`` and redistributes where needed, and the
step equals the single-device step (``tests/torch_frontend/oracle.py``: 1e-16). ``prove
--torch`` refuses this right file with exit 3 ("the program's ops depend on the sizes"): torch
2.13 computes ``_StridedShard`` layouts with data-dependent index ops (``unbind`` / ``item`` of
index tensors, one per position, then ``sort``, ``index_select``, ``as_strided``).
``packed_tokens_179502_buggy.py`` runs it under the faulty rule of #179502
(``dtensor_faults.py``).
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

MESH = {"tp": 2}
SIZES = {"seqs": 2, "seq": 4, "hidden": 6}
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
    return {"x": torch.zeros(s["seqs"], s["seq"], s["hidden"])}


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
