"""BUG: FSDP2 with a wrong gradient divide factor: ``set_gradient_divide_factor(1.0)`` makes
the data-parallel reduction a sum where the loss is a per-rank mean.

``prove --torch`` refutes every gradient with ``plan = 2.000 x spec: 2 = |dp|``, naming the
``fully_shard`` line.
"""

import llama_common
import torch
from llama_common import SIZES, build_optimizer, make_batch  # noqa: F401
from llama_parallelize import parallelize_llama

MESH = {"dp": 2}


def build_model(s):
    return llama_common.build_model(s)


def parallelize(model, mesh):
    parallelize_llama(model, mesh, param_dtype=torch.bfloat16,
                             reduce_dtype=torch.float32)
    for block in model.layers.values():
        block.set_gradient_divide_factor(1.0)      # BUG: the default averages over dp
    model.set_gradient_divide_factor(1.0)
    return model


def train_step(model, optimizer, batch, mesh):
    return llama_common.train_step(model, optimizer, batch, mesh)
