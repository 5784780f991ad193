"""BUG: ``use_local_output`` misuse: the vocab-parallel output head returns the rank's *local*
logits (``use_local_output=True``) although the loss is computed as if they were the whole
vocabulary, so each rank's cross-entropy sees only its vocab shard (at run time the labels of the
other shards index out of range; on meta tensors nothing complains).

``prove --torch`` refutes every gradient, starting at ``grad:output.weight``.
"""

from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module,
)

import llama_common
from llama_common import SIZES, build_optimizer, make_batch  # noqa: F401
from llama_parallelize import apply_tp_blocks

MESH = {"tp": 2}


def build_model(s):
    return llama_common.build_model(s)


def parallelize(model, mesh):
    tp = mesh["tp"]
    parallelize_module(model, tp, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        # BUG: the head's local vocab shard handed to a plain cross-entropy (loss_parallel
        # needs use_local_output=False to keep the DTensor)
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1),
                                  use_local_output=True),
    })
    apply_tp_blocks(model, tp)
    return model


def train_step(model, optimizer, batch, mesh):
    return llama_common.train_step(model, optimizer, batch, mesh, parallel_loss=False)
