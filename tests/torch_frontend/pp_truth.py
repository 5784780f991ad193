"""The truth for the pipelining examples (``examples/torch/*_pp_*.py``): run one training step
of a train file single-device and on a real gloo process group on localhost (one OS process
per rank of ``MESH``, ``torch.multiprocessing`` spawn), in float64, from the same initial
parameters and global batch, and report how far each rank's gradients (as ``optimizer.step()``
sees them) and updated parameters are from the single-device step's (a ``fully_shard``
parameter's and gradient's full tensors).

Ranks of a pipeline stage hold only their stage's parameters; each is compared under its name
in the single-device model (a tied weight under any of its names). The batch is split on dim 0
over the ``dp*`` axes (the default data sharding). A test, never part of a verdict.

    python tests/torch_frontend/pp_truth.py FILE
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

__all__ = ["run", "step_values", "global_batch"]


def _load(path: str) -> Any:
    sys.path.insert(0, str(Path(path).resolve().parent))
    spec = importlib.util.spec_from_file_location("train_file", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def global_batch(mod: Any, seed: int) -> dict[str, torch.Tensor]:
    """The global batch at the file's ``SIZES``: integer inputs drawn in ``[0, vocab)`` (token
    ids and labels), float inputs from a normal distribution."""
    g = torch.Generator().manual_seed(seed + 1)
    out = {}
    for k, v in mod.make_batch(dict(mod.SIZES)).items():
        if v.dtype in (torch.long, torch.int32, torch.int64):
            out[k] = torch.randint(0, mod.SIZES["vocab"], tuple(v.shape), generator=g)
        else:
            out[k] = torch.randn(tuple(v.shape), generator=g, dtype=torch.float64)
    return out


def step_values(mod: Any, model: Any, batch: dict[str, torch.Tensor], mesh: Any
                ) -> dict[str, dict[str, list]]:
    """Run ``train_step`` once; name -> {"grad": the gradient as ``optimizer.step()`` is entered,
    "param": the parameter after the step}, under every name of a parameter (tied ones too)."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    opt = mod.build_optimizer(model)
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    grads: dict[str, list] = {}

    def snap(optimizer: Any, args: Any, kwargs: Any) -> None:  # noqa: ARG001
        if optimizer is opt and not grads:
            for p in model.parameters():
                if p.grad is not None:
                    for n in names[id(p)]:
                        grads[n] = _full(p.grad).detach().clone().tolist()

    handle = register_optimizer_step_pre_hook(snap)
    try:
        mod.train_step(model, opt, batch, mesh)
    finally:
        handle.remove()
    out = {}
    for p in model.parameters():
        for n in names[id(p)]:
            out[n] = {"param": _full(p).detach().clone().tolist(), "grad": grads.get(n)}
    return out


def _full(t: Any) -> Any:
    """A ``DTensor`` (``fully_shard``'s sharded parameter or gradient) as its full tensor
    (a collective over its mesh: every rank of a stage calls it in the same order), else ``t``."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def _coords(mesh: dict[str, int], rank: int) -> dict[str, int]:
    out = {}
    for a in reversed(list(mesh)):
        out[a] = rank % mesh[a]
        rank //= mesh[a]
    return {a: out[a] for a in mesh}


def _rank(rank: int, world: int, port: int, path: str, seed: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        mod = _load(path)
        mesh = init_device_mesh("cpu", tuple(mod.MESH.values()),
                                mesh_dim_names=tuple(mod.MESH))
        batch = global_batch(mod, seed)
        c = _coords(mod.MESH, rank)
        dp = [a for a in mod.MESH if a.startswith("dp")]
        n = math.prod(mod.MESH[a] for a in dp)
        i = 0
        for a in dp:
            i = i * mod.MESH[a] + c[a]
        local = {k: v.chunk(n, 0)[i].clone() for k, v in batch.items()}
        torch.manual_seed(seed)
        model = mod.parallelize(mod.build_model(dict(mod.SIZES)), mesh)
        vals = step_values(mod, model, local, mesh)
        Path(out).write_text(json.dumps({"coords": c, "values": vals}))
    finally:
        dist.destroy_process_group()


def run(path: str, seed: int = 0, timeout: float = 240.0) -> dict[str, Any]:
    """One step of ``path`` single-device and on a real gloo group of ``MESH``'s size.

    Returns ``{"grad": name -> max |rank - spec|, "param": likewise, "held": name -> ranks
    holding it, "spec_names": every name of every single-device parameter, "seconds": wall
    time of the parallel run}``. Restores torch's default dtype and ``sys.path``.

    Raises:
        RuntimeError: a rank failed or did not finish within ``timeout`` (the ranks still
            alive are terminated: no orphans).
    """
    old_dtype, old_path = torch.get_default_dtype(), list(sys.path)
    try:
        return _run(str(Path(path).resolve()), seed, timeout)
    finally:
        torch.set_default_dtype(old_dtype)
        sys.path[:] = old_path


def _run(path: str, seed: int, timeout: float) -> dict[str, Any]:
    torch.set_default_dtype(torch.float64)
    mod = _load(path)
    torch.manual_seed(seed)
    spec = step_values(mod, mod.build_model(dict(mod.SIZES)), global_batch(mod, seed), None)
    world = math.prod(mod.MESH.values())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        outs = [str(Path(d) / f"r{r}.json") for r in range(world)]
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_rank, args=(r, world, port, path, seed, outs[r]))
                 for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        alive = [p for p in procs if p.is_alive()]
        for p in alive:
            p.terminate()
        for p in alive:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        if alive:
            raise RuntimeError(f"{path}: {len(alive)} rank(s) did not finish in {timeout} s")
        bad = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode != 0]
        if bad:
            raise RuntimeError(f"{path}: ranks failed (rank, exit code): {bad}")
        ranks = [json.loads(Path(o).read_text()) for o in outs]
    seconds = time.monotonic() - t0
    res: dict[str, Any] = {"grad": {}, "param": {}, "held": {}, "spec_names": sorted(spec),
                           "seconds": seconds}
    for r, rv in enumerate(ranks):
        for name, v in rv["values"].items():
            if name not in spec:
                raise RuntimeError(f"{path}: rank {r} holds {name!r}, not a single-device name")
            res["held"].setdefault(name, []).append(r)
            for key in ("param", "grad"):
                if v[key] is None or spec[name][key] is None:
                    raise RuntimeError(f"{path}: rank {r}: {name!r} has no {key}")
                diff = float((torch.tensor(v[key]) - torch.tensor(spec[name][key])).abs().max())
                res[key][name] = max(res[key].get(name, 0.0), diff)
    return res


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1]), indent=1, default=str))
