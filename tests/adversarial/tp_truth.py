"""Truth for the tensor-parallel train files of rounds 32b and 32d (``plans/round32b/r32b_04``
.., ``plans/round32d/r32d_05`` ..): one step on a real gloo process group, float64, against
the single-device step. ``MESH`` is ``{"tp": n}`` (every rank gets the whole batch) or a
two-axis ``{"dp": d, "tp": n}`` (the batch split on dim 0 over the first axis); integer batch
inputs are drawn in ``[0, SIZES["vocab"])``, float ones from N(0, 1). Prints, per rank, the
largest difference of every parameter (``full_tensor()`` of a DTensor) after the step.

    python tests/adversarial/tp_truth.py FILE
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _load(path):
    spec = importlib.util.spec_from_file_location("train_file", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _batch(mod):
    g = torch.Generator().manual_seed(1)
    out = {}
    for k, v in mod.make_batch(mod.SIZES).items():
        if v.dtype == torch.long:
            out[k] = torch.randint(0, mod.SIZES["vocab"], v.shape, generator=g)
        else:
            out[k] = torch.randn(v.shape, generator=g, dtype=torch.float64)
    return out


def _single(mod):
    torch.manual_seed(0)
    m = mod.build_model(dict(mod.SIZES))
    opt = mod.build_optimizer(m)
    mod.train_step(m, opt, _batch(mod), None)
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def _worker(rank, world, port, path, out):
    torch.set_default_dtype(torch.float64)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    mod = _load(path)
    shape = tuple(mod.MESH.values())
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=tuple(mod.MESH))
    ref = _single(mod)
    torch.manual_seed(0)
    m = mod.build_model(dict(mod.SIZES))
    m = mod.parallelize(m, mesh)
    opt = mod.build_optimizer(m)
    batch = _batch(mod)
    if len(shape) == 2:         # dp x tp: the batch over the first axis
        r = mesh[next(iter(mod.MESH))].get_local_rank()
        batch = {k: v.chunk(shape[0], 0)[r].clone() for k, v in batch.items()}
    mod.train_step(m, opt, batch, mesh)
    diff = {}
    for k, v in m.state_dict().items():
        v = v.full_tensor() if hasattr(v, "full_tensor") else v
        diff[k] = float((v.detach() - ref[k]).abs().max())
    with open(f"{out}.{rank}", "w") as f:
        json.dump(diff, f)
    dist.destroy_process_group()


def main(path):
    torch.set_default_dtype(torch.float64)
    mod = _load(path)
    world = 1
    for n in mod.MESH.values():
        world *= n
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r")
        mp.start_processes(_worker, args=(world, port, os.path.abspath(path), out),
                           nprocs=world, start_method="spawn")
        res = [json.load(open(f"{out}.{r}")) for r in range(world)]
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
