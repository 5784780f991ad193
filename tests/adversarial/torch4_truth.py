"""The truth for round 4's train files (``ATTEMPTS.md`` "Round 4"): run a train file for several
*consecutive* steps, single-device and on a real gloo process group (one OS process per rank,
``torch.multiprocessing``), and report how far each rank's model (every parameter and buffer
as ``state_dict`` holds it, through the rank's shard) is from the single-device model after
each step.

The front end's own oracle (``tests/torch_frontend/oracle.py``) compares the outputs of one
step that ``prove --torch`` states goals for; round 4's findings are about what one step leaves
behind for the next (the module's parameters, gradients, optimizer hyperparameters) and about
ranks at sizes that are never traced, so this runs the real program for ``steps`` steps.

The device mesh is the file's own ``MESH`` (one axis ``{"dp": N}`` for round 4; HSDP
``{"dp_replicate": 2, "dp_shard": 2}`` since round 46c), on the CPU with gloo, float64, the
batch split on dim 0 over every rank (the default data sharding: the batch over the dp axes).

    python tests/adversarial/torch4_truth.py FILE [STEPS]
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("train_file", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).resolve().parent))
    spec.loader.exec_module(mod)
    return mod


def _batches(mod: Any, steps: int, seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed + 1)
    shapes = {k: v for k, v in mod.make_batch(mod.SIZES).items()}
    return [{k: torch.randn(v.shape, generator=g, dtype=torch.float64) for k, v in shapes.items()}
            for _ in range(steps)]


def _model(mod: Any, seed: int) -> Any:
    torch.manual_seed(seed)
    return mod.build_model(dict(mod.SIZES))


def _state(model: Any) -> dict[str, list]:
    """Every ``state_dict`` entry as a full tensor (a DTensor, FSDP2's shard, is gathered)."""
    out = {}
    for k, v in model.state_dict().items():
        if hasattr(v, "full_tensor"):
            v = v.full_tensor()
        out[k] = v.detach().double().tolist()
    return out


def _rank(rank: int, world: int, port: int, path: str, steps: int, seed: int, out: str,
          read_last: bool = False) -> None:
    # what torchrun sets for every rank
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(world), GROUP_RANK="0",
                      GROUP_WORLD_SIZE="1", ROLE_NAME="default")
    torch.set_default_dtype(torch.float64)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh

    mod = _load(path)
    mesh = init_device_mesh("cpu", tuple(mod.MESH.values()), mesh_dim_names=tuple(mod.MESH))
    model = mod.parallelize(_model(mod, seed), mesh) or _model(mod, seed)
    opt = mod.build_optimizer(model)
    per = []
    for b in _batches(mod, steps, seed):
        local = {k: v.chunk(world, 0)[rank].clone() for k, v in b.items()}
        mod.train_step(model, opt, local, mesh)
        per.append(None if read_last else _state(model))
    if read_last:   # FSDP2's state_dict hook reshards: read once, after the last step (R43d-4)
        per = [_state(model)] * len(per)
    Path(out).write_text(json.dumps(per))
    dist.destroy_process_group()


def run(path: str, steps: int = 2, seed: int = 0, read_last: bool = False
        ) -> list[dict[str, float]]:
    """Per step, name -> max over ranks of max |rank's value - single-device value|;
    ``read_last``: every rank's state read once, after the last step (FSDP2's ``state_dict``
    hook reshards every unit, which hides unsharded parameters kept stale into the next step:
    round 43d, R43d-4 / R43d-5; only the last step's row is then meaningful).

    Restores torch's default dtype and ``sys.path`` (the file's folder) on return."""
    old_dtype, old_path = torch.get_default_dtype(), list(sys.path)
    try:
        return _run(path, steps, seed, read_last)
    finally:
        torch.set_default_dtype(old_dtype)
        sys.path[:] = old_path


def _run(path: str, steps: int, seed: int, read_last: bool) -> list[dict[str, float]]:
    torch.set_default_dtype(torch.float64)
    mod = _load(path)
    world = math.prod(mod.MESH.values())
    model = _model(mod, seed)
    opt = mod.build_optimizer(model)
    spec = []
    for b in _batches(mod, steps, seed):
        mod.train_step(model, opt, {k: v.clone() for k, v in b.items()}, None)
        spec.append(_state(model))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        outs = [str(Path(d) / f"r{r}.json") for r in range(world)]
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_rank, args=(r, world, port, str(Path(path).resolve()), steps,
                                                 seed, outs[r], read_last)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(300)
        ranks = [json.loads(Path(o).read_text()) for o in outs]
    res = []
    for k in range(steps):
        row = {}
        for name, sv in spec[k].items():
            s = torch.tensor(sv)
            row[name] = max(float((torch.tensor(r[k][name]) - s).abs().max()) for r in ranks)
        res.append(row)
    return res


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if a != "--read-last"]
    print(json.dumps(run(argv[0], int(argv[1]) if len(argv) > 1 else 2,
                         read_last="--read-last" in sys.argv), indent=1))
