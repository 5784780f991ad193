"""An independent numeric oracle for ``prove --torch`` (issue 11 item 7): run every rank of a
small mesh with real float64 values and compare with the single-device run.

``run_oracle(path, ...)`` executes the train file in a child process (``python -c``; its
process group, default dtype and any patch the file applies stay there) and returns, for each
output the front end states a goal for (the loss, every gradient as the optimizer sees it,
every updated parameter and optimizer state tensor), per rank, how far the parallel run is from
the single-device run:

* the **spec** is the unparallelised model from ``build_model(SIZES)`` run by ``train_step``
  on the CPU in float64;
* the **plan** is a model built the same way with the same initial values, parallelised by the
  file's own ``parallelize(model, mesh)`` and run by ``train_step`` under
  ``torch.distributed._local_tensor.LocalTensorMode`` (every rank of the mesh, numerically, in
  one process; collectives are computed, not faked) on a fake process group of ``MESH``;
* each rank's data is its block of one global batch under the file's data sharding (the
  front end's ``_data_sharding``: ``DATA_SHARDING`` or the batch dim over the ``dp*`` axes,
  the outer axis major);
* a plan output is compared with the spec value *through its placement*: a ``Shard`` /
  ``_StridedShard`` output with ``distribute_tensor(spec_value, mesh, placements)``'s block for
  that rank (torch's chunking, not an op's sharding rule), a ``Partial`` one after
  ``redistribute`` to ``Replicate`` on those axes (a numeric all-reduce), a plain tensor with the
  full spec value on every rank.

Everything is float64: the default dtype while the model is built, random initial values
(the model's own initialisation, norm weights jittered by 0.1 so that they are not all ones),
random optimizer state (``exp_avg`` ~ N(0, 0.01), ``exp_avg_sq`` ~ U(0, 0.01), the step count
``OPTIMIZER_STEP - 1``, as the front end takes them as inputs), and a ``TorchFunctionMode``
that keeps ``.float()`` / ``.to(float32)`` / ``.half()`` / ``.bfloat16()`` of a float64 tensor
in float64 (the Llama files cast the logits to float32 for the loss; in float32 the two runs
would differ by rounding). Integer inputs are drawn in ``[0, n)`` with ``n`` the smallest
``nn.Embedding`` size of the model (or ``INDEX_RANGE`` of the file when it defines one);
boolean inputs are fair coin flips.

This proves nothing about the real sizes (it is one draw at the file's ``SIZES``); it is a
test of the front end: equal plans must agree to a float64 tolerance, refuted plans must show
the factor ``prove`` reported. It is not used by ``prove``.

Run as ``python tests/torch_frontend/oracle.py SEED FILE...`` to print the JSON reports.

Not runnable here: FSDP2 ``fully_shard`` and composable ``replicate`` (see
``_refuse_data_parallel_wrappers``), real widths (the values are real tensors), and a plan
that fails on real values (the error is returned: ``llama_tp_local_output_buggy.py`` indexes
its vocab shard with a global label).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["OutputCompare", "OracleReport", "OracleUnsupported", "run_oracle", "factor_of"]


@dataclass(frozen=True)
class OutputCompare:
    """One output, compared on every rank.

    Attributes:
        name: the goal's name (``loss``, ``grad:<param>``, ``<param>``, ``exp_avg:<param>``).
        placements: the plan output's placements per axis of its mesh (``()``: a plain tensor).
        diff: rank (``"dp=0,tp=1"``) -> max |plan - spec| over the rank's block.
        scale: max |spec| over the whole value.
        factor: rank -> c when the rank's block is ``c * spec`` (least squares, residual below
            ``1e-9 * max(1, max |plan|)``) and spec is not all zero there, else ``None``.
        varies: the plan's value differs between ranks where the spec has one value (the loss
            of a data-parallel plan: each rank's own mean); the front end states no goal then.
    """

    name: str
    placements: tuple[str, ...]
    diff: dict[str, float]
    scale: float
    factor: dict[str, float | None]
    varies: bool = False

    @property
    def max_diff(self) -> float:
        return max(self.diff.values()) if self.diff else 0.0


@dataclass(frozen=True)
class OracleReport:
    """The oracle's answer for one train file: ``outputs`` by name, the ranks (coordinate
    strings) in rank order, the seconds the child took."""

    path: str
    ranks: tuple[str, ...]
    outputs: dict[str, OutputCompare]
    seconds: float

    def compared(self) -> dict[str, OutputCompare]:
        """The outputs the front end states a goal for (a loss that varies over ranks is not)."""
        return {k: v for k, v in self.outputs.items() if not v.varies}

    def max_diff(self) -> float:
        return max((v.max_diff for v in self.compared().values()), default=0.0)


def factor_of(plan: Any, spec: Any) -> float | None:
    """``c`` with ``plan == c * spec`` (float64 arrays), or ``None`` when no constant fits or
    ``spec`` is all zero."""
    import numpy as np

    p = np.asarray(plan, dtype=np.float64).ravel()
    s = np.asarray(spec, dtype=np.float64).ravel()
    ss = float(s @ s)
    if ss <= 1e-300 or not np.all(np.isfinite(p)):
        return None
    c = float(p @ s) / ss
    tol = 1e-9 * max(1.0, float(np.max(np.abs(p))) if p.size else 1.0)
    return c if float(np.max(np.abs(p - c * s))) <= tol else None


def run_oracle(*paths: str | Path, seed: int = 0, timeout: float = 900
               ) -> list[OracleReport | str]:
    """Run the oracle on each of ``paths`` in one child process (see the module docstring):
    per file its report, or the one-line error that stopped the run (``"IndexError: ..."``,
    ``"OracleUnsupported: ..."``).

    Raises:
        AssertionError: the child itself failed (its stderr's tail is the message).
    """
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(seed),
                        *map(str, paths)], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0 or not r.stdout.strip():
        raise AssertionError(f"oracle child failed ({r.returncode}): {r.stderr[-3000:]}")
    answers: list[OracleReport | str] = []
    for doc in json.loads(r.stdout.strip().splitlines()[-1]):
        if "error" in doc:
            answers.append(doc["error"])
            continue
        outs = {o["name"]: OutputCompare(o["name"], tuple(o["placements"]), o["diff"],
                                         o["scale"], o["factor"], o["varies"])
                for o in doc["outputs"]}
        answers.append(OracleReport(doc["path"], tuple(doc["ranks"]), outs, doc["seconds"]))
    return answers


# ---------------------------------------------------------------------------------------------
# the child (imports torch; never imported by the tests' own process)


def _float64_mode() -> Any:
    """A ``TorchFunctionMode`` keeping casts of float64 tensors to a narrower float in float64."""
    import torch
    from torch.overrides import TorchFunctionMode

    narrow = {torch.float32, torch.float16, torch.bfloat16}

    class Float64(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            kwargs = kwargs or {}
            x = args[0] if args else None
            if isinstance(x, torch.Tensor) and x.dtype == torch.float64:
                if func in (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16):
                    return x
                if func is torch.Tensor.to:
                    dt = kwargs.get("dtype")
                    rest = [a for a in args[1:] if isinstance(a, torch.dtype)]
                    if dt in narrow or (rest and rest[0] in narrow):
                        return x
            return func(*args, **kwargs)

    return Float64()


def _replicate_on_every_rank(model: Any, mode: Any) -> None:
    """Make every parameter and buffer a ``LocalTensor`` with the same value on each rank.

    A plain tensor under ``LocalTensorMode`` is one storage shared by all ranks: an in-place
    update with per-rank values (``optimizer.step()`` after a hand-written DDP) applies each
    rank's update to it in turn. Tied parameters stay tied."""
    import torch
    from torch import nn

    done: dict[int, Any] = {}
    for m in model.modules():
        for n, p in list(m._parameters.items()):  # noqa: SLF001
            if p is None:
                continue
            if id(p) not in done:
                v = p.detach().clone()
                done[id(p)] = nn.Parameter(mode.rank_map(lambda r, v=v: v.clone()),
                                           requires_grad=p.requires_grad)
            m._parameters[n] = done[id(p)]  # noqa: SLF001
        for n, b in list(m._buffers.items()):  # noqa: SLF001
            if isinstance(b, torch.Tensor):
                v = b.detach().clone()
                m._buffers[n] = mode.rank_map(lambda r, v=v: v.clone())  # noqa: SLF001


class OracleUnsupported(RuntimeError):
    """The train file uses what ``LocalTensorMode`` cannot run in torch 2.13."""


def _refuse_data_parallel_wrappers(model: Any, path: str) -> None:
    """FSDP2 and composable ``replicate`` do not run under ``LocalTensorMode`` in torch 2.13.0:
    FSDP2 frees and re-allocates parameter storage with ``untyped_storage().resize_`` (refused
    for a ``LocalTensor``; with that patched out, the ranks' shards come out wrong), and
    ``replicate`` is DDP's C++ reducer (``_verify_param_shape_across_processes``: "data is not
    allocated"). Measured on this machine; the oracle says so instead of a wrong comparison."""
    from torch.distributed._composable.contract import _get_registry
    from torch.distributed.fsdp import FSDPModule

    for name, m in model.named_modules():
        reg = _get_registry(m) or {}
        if isinstance(m, FSDPModule) or "replicate" in reg or "fully_shard" in reg:
            raise OracleUnsupported(f"{path}: {name or 'the model'} is wrapped by fully_shard / "
                                    "replicate, which LocalTensorMode cannot run (torch 2.13)")


def _index_bound(tf: Any, model: Any) -> int:
    from torch import nn

    n = getattr(tf.module, "INDEX_RANGE", None)
    if n is not None:
        return int(n)
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, nn.Embedding)]
    return min(sizes) if sizes else 2


def _coords(mesh: dict[str, int]) -> list[dict[str, int]]:
    out: list[dict[str, int]] = [{}]
    for a, n in mesh.items():
        out = [{**c, a: i} for c in out for i in range(n)]
    return out


def _rank_key(c: dict[str, int]) -> str:
    return ",".join(f"{a}={i}" for a, i in c.items())


def _child(path: str, seed: int) -> dict[str, Any]:  # noqa: C901, PLR0915 -- one straight run
    import time

    import numpy as np
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed._local_tensor import LocalTensor, LocalTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.distributed.tensor.placement_types import Partial, Replicate
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from spec_lang.torch_frontend.capture import (
        _data_sharding, _params, _snapshot_on_entry, _state_keys, placement_str,
    )
    from spec_lang.torch_frontend.contract import read_train_file
    from spec_lang.torch_frontend.world import rank_of

    t0 = time.perf_counter()
    torch.set_default_dtype(torch.float64)
    tf = read_train_file(path)
    sys.path.insert(0, str(Path(path).resolve().parent))
    sizes = dict(tf.sizes)
    mesh_sizes = dict(tf.mesh)
    world = math.prod(mesh_sizes.values())
    coords = _coords(mesh_sizes)
    coords.sort(key=lambda c: rank_of(mesh_sizes, c))
    keys = [_rank_key(c) for c in coords]

    # initial values, data and optimizer state: one draw, shared by both runs
    torch.manual_seed(seed)
    spec_model = tf.fn("build_model")(dict(sizes))
    with torch.no_grad():
        for m in spec_model.modules():
            for n, p in m.named_parameters(recurse=False):
                if p.dim() == 1 and bool((p == 1).all()):
                    p.add_(0.1 * torch.randn_like(p))
    init = {k: v.detach().clone() for k, v in spec_model.state_dict().items()}
    batch_shape = tf.fn("make_batch")(dict(sizes))
    bound = _index_bound(tf, spec_model)
    batch: dict[str, torch.Tensor] = {}
    for k, t in batch_shape.items():
        if t.dtype == torch.bool:
            batch[k] = torch.rand(t.shape) < 0.5
        elif t.dtype.is_floating_point:
            batch[k] = torch.randn(t.shape, dtype=torch.float64)
        else:
            batch[k] = torch.randint(0, bound, t.shape, dtype=t.dtype)
    params, _tied = _params(spec_model)
    state_keys = _state_keys(tf.fn("build_optimizer")(spec_model))
    step = tf.optimizer_step
    states: dict[str, dict[str, torch.Tensor]] = {}
    for n, p in params:
        st = {}
        for k in state_keys:
            st[k] = (torch.rand_like(p) * 0.01 if k.endswith("_sq")
                     else torch.randn_like(p) * 0.1 if k == "exp_avg"
                     else torch.randn_like(p))
        states[n] = st

    def load_state(opt: Any, by_name: dict[str, Any], make: Any) -> None:
        for n, p in by_name.items():
            st = {k: make(states[n][k], p) for k in state_keys}
            if state_keys and type(opt).__name__ in ("Adam", "AdamW"):
                st["step"] = torch.tensor(float(step - 1))
            if st:
                opt.state[p] = st

    def outputs_of(model: Any, opt: Any, loss: Any, snaps: dict[str, Any]) -> dict[str, Any]:
        named = dict(_params(model)[0])
        out: dict[str, Any] = {"loss": loss}
        for n in named:
            if n in snaps:
                out[f"grad:{n}"] = snaps[n]
        for n, p in named.items():
            out[n] = p.detach()
            st = opt.state.get(p, {})   # every state tensor, Adam's step too (as capture.py)
            for k in list(state_keys) + sorted(set(st) - set(state_keys), key=str):
                if isinstance(st.get(k), torch.Tensor):
                    out[f"{k}:{n}"] = st[k]
        for n, p in named.items():      # a gradient left for the next step (grad_left:<p>)
            if p.grad is not None:
                out[f"grad_left:{n}"] = p.grad.detach()
        return out

    def run(model: Any, data: dict[str, Any], mesh: Any) -> dict[str, Any]:
        opt = tf.fn("build_optimizer")(model)
        load_state(opt, dict(_params(model)[0]), mesh_make if mesh is not None else
                   (lambda v, p: v.clone()))
        snaps: dict[str, Any] = {}

        def snapshot() -> None:
            if snaps:
                return
            for n, p in _params(model)[0]:
                if p.grad is not None:
                    snaps[n] = p.grad.detach().clone()

        with _float64_mode(), _snapshot_on_entry(opt, snapshot):
            loss = tf.fn("train_step")(model, opt, data, mesh)
        return outputs_of(model, opt, loss, snaps)

    def mesh_make(v: Any, p: Any) -> Any:
        # every rank's own copy (see _replicate_on_every_rank): AdamW updates it in place
        v = mode.rank_map(lambda r: v.clone())
        if isinstance(p, DTensor):
            return distribute_tensor(v, p.device_mesh, p.placements)
        return v

    spec = run(spec_model, {k: v.clone() for k, v in batch.items()}, None)
    spec = {k: v.detach() for k, v in spec.items()}

    # the plan, every rank at once
    sharding = _data_sharding(tf, batch, list(mesh_sizes), mesh_sizes)
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    plan_model = tf.fn("build_model")(dict(sizes))
    plan_model.load_state_dict(init)
    result: dict[str, Any] = {"path": path, "ranks": keys, "outputs": []}
    mode = LocalTensorMode(world)
    with mode:
        mesh = init_device_mesh("cpu", tuple(mesh_sizes.values()),
                                mesh_dim_names=tuple(mesh_sizes))

        def block(x: torch.Tensor, per: dict[str, int], r: int) -> torch.Tensor:
            c = coords[r]
            for d in sorted(set(per.values())):
                axes = [a for a in mesh_sizes if per.get(a) == d]
                n = math.prod(mesh_sizes[a] for a in axes)
                i = 0
                for a in axes:
                    i = i * mesh_sizes[a] + c[a]
                x = x.chunk(n, dim=d)[i]
            return x.clone()

        data = {k: mode.rank_map(lambda r, k=k: block(batch[k], sharding.get(k, {}), r))
                for k in batch}
        _replicate_on_every_rank(plan_model, mode)
        out = tf.fn("parallelize")(plan_model, mesh)
        plan_model = out if isinstance(out, nn.Module) else plan_model
        _refuse_data_parallel_wrappers(plan_model, path)
        plan = run(plan_model, data, mesh)

        for name, sv in spec.items():
            if name not in plan:
                continue
            pv = plan[name]
            if isinstance(pv, DTensor):
                pls = tuple(placement_str(p) for p in pv.placements)
                if any(isinstance(p, Partial) for p in pv.placements):
                    pv = pv.redistribute(pv.device_mesh, [Replicate() if isinstance(p, Partial)
                                                          else p for p in pv.placements])
                want = distribute_tensor(sv.clone(), pv.device_mesh, pv.placements)._local_tensor
                got = pv._local_tensor
            else:
                pls = ()
                want, got = sv, pv

            def per_rank(t: Any, r: int) -> np.ndarray:
                if isinstance(t, LocalTensor):
                    t = t._local_tensors[r]
                return t.detach().to(torch.float64).numpy().copy()

            diff: dict[str, float] = {}
            fac: dict[str, float | None] = {}
            vals = []
            for r, key in enumerate(keys):
                g, w = per_rank(got, r), per_rank(want, r)
                vals.append(g)
                diff[key] = float(np.max(np.abs(g - w))) if g.size else 0.0
                fac[key] = factor_of(g, w)
            varies = pls == () and not isinstance(want, LocalTensor) and len(vals) > 1 and any(
                float(np.max(np.abs(v - vals[0]))) > 1e-12 for v in vals[1:])
            result["outputs"].append({
                "name": name, "placements": list(pls), "diff": diff,
                "scale": float(sv.abs().max()) if sv.numel() else 0.0, "factor": fac,
                "varies": bool(varies and name == "loss")})
    dist.destroy_process_group()
    result["seconds"] = time.perf_counter() - t0
    return result


def _main(argv: list[str]) -> int:
    """``oracle.py SEED FILE...``: one JSON line, a list with one report per file (or
    ``{"path": ..., "error": "Type: message"}`` where the file could not be run)."""
    sys.path.insert(0, str(ROOT))
    seed, paths = int(argv[0]), argv[1:]
    out = []
    for p in paths:
        try:
            out.append(_child(p, seed))
        except Exception as e:  # noqa: BLE001 -- reported per file, the test decides
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            out.append({"path": p, "error": f"{type(e).__name__}: {e}"})
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
