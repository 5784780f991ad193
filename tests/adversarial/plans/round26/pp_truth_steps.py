"""Round 26: ``tests/torch_frontend/pp_truth.py`` over K consecutive steps (gloo, float64, one
process per rank). The train file's ``train_step`` runs K times single-device and on the gloo
group, one optimizer per side built once; after each step, max |plan - spec| of every gradient
(as ``optimizer.step()`` sees it) and parameter (buffers too). Batch j is pp_truth's global
batch of seed j, split over the ``dp*`` axes. A test, never part of a verdict.

    PYTHONPATH=. python tests/adversarial/plans/round26/pp_truth_steps.py FILE [K]
"""

from __future__ import annotations

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

_ROOT = Path(__file__).resolve().parents[4]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.torch_frontend.pp_truth import _coords, _load, global_batch  # noqa: E402


def steps(mod: Any, model: Any, batches: list[dict], mesh: Any) -> list[dict]:
    """``train_step`` once per batch; per step name -> {"grad", "param"} as after the step."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    opt = mod.build_optimizer(model)
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    out = []
    for b in batches:
        grads: dict[str, list] = {}

        def snap(o: Any, a: Any, k: Any) -> None:  # noqa: ARG001
            if o is opt and not grads:
                for p in model.parameters():
                    if p.grad is not None:
                        for n in names[id(p)]:
                            grads[n] = p.grad.detach().clone().tolist()
        h = register_optimizer_step_pre_hook(snap)
        try:
            mod.train_step(model, opt, b, mesh)
        finally:
            h.remove()
        vals = {}
        for p in model.parameters():
            for n in names[id(p)]:
                vals[n] = {"param": p.detach().clone().tolist(), "grad": grads.get(n)}
        for n, bf in model.named_buffers():
            vals["buffer:" + n] = {"param": bf.detach().clone().tolist(), "grad": None}
        out.append(vals)
    return out


def _rank(rank: int, world: int, port: int, path: str, seed: int, k: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        mod = _load(path)
        mesh = init_device_mesh("cpu", tuple(mod.MESH.values()), mesh_dim_names=tuple(mod.MESH))
        c = _coords(mod.MESH, rank)
        dp = [a for a in mod.MESH if a.startswith("dp")]
        n = math.prod(mod.MESH[a] for a in dp)
        i = 0
        for a in dp:
            i = i * mod.MESH[a] + c[a]
        bs = [{kk: v.chunk(n, 0)[i].clone() for kk, v in global_batch(mod, seed + j).items()}
              for j in range(k)]
        torch.manual_seed(seed)
        model = mod.parallelize(mod.build_model(dict(mod.SIZES)), mesh)
        Path(out).write_text(json.dumps({"coords": c, "values": steps(mod, model, bs, mesh)}))
    finally:
        dist.destroy_process_group()


def run(path: str, k: int = 2, seed: int = 0, timeout: float = 300.0) -> dict[str, Any]:
    """``{"steps": [{"grad": name -> max diff, "param": ...} per step], "seconds"}``."""
    path = str(Path(path).resolve())
    torch.set_default_dtype(torch.float64)
    mod = _load(path)
    torch.manual_seed(seed)
    spec = steps(mod, mod.build_model(dict(mod.SIZES)),
                 [global_batch(mod, seed + j) for j in range(k)], None)
    world = math.prod(mod.MESH.values())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        outs = [str(Path(d) / f"r{r}.json") for r in range(world)]
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_rank, args=(r, world, port, path, seed, k, outs[r]))
                 for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join()
        bad = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode != 0]
        if bad:
            raise RuntimeError(f"{path}: ranks failed (rank, exit code): {bad}")
        ranks = [json.loads(Path(o).read_text()) for o in outs]
    res = []
    for j in range(k):
        row: dict[str, dict[str, Any]] = {"grad": {}, "param": {}}
        for r, rv in enumerate(ranks):
            for name, v in rv["values"][j].items():
                if name not in spec[j]:
                    continue
                for key in ("param", "grad"):
                    a, b = v[key], spec[j][name][key]
                    if a is None and b is None:
                        continue
                    if a is None or b is None:
                        row[key][f"{name}@rank{r}"] = "missing on the " + (
                            "plan" if a is None else "spec")
                        continue
                    diff = float((torch.tensor(a) - torch.tensor(b)).abs().max())
                    row[key][name] = max(row[key].get(name, 0.0), diff)
        res.append(row)
    return {"steps": res, "seconds": time.monotonic() - t0}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2), indent=1))
