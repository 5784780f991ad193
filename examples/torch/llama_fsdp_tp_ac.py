"""Llama (torchtitan-shaped) with FSDP2 on dp, tensor + sequence parallelism with loss_parallel
on tp (2-D: dp 2 x tp 2) and every block activation-checkpointed, in torchtitan's order (TP,
AC, FSDP2): the blocks are recomputed in the backward with their parameters gathered again.

    prove --torch examples/torch/llama_fsdp_tp_ac.py
"""

import torch
from llama_common import (  # noqa: F401
    SIZES, build_model, build_optimizer, make_batch, train_step)
from llama_parallelize import parallelize_llama

MESH = {"dp": 2, "tp": 2}


def parallelize(model, mesh):
    return parallelize_llama(model, mesh, activation_checkpoint=True,
                             param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
