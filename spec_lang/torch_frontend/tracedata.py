"""Traces as plain data, captured in child processes (one process per trace).

Each trace runs the user's file in a fresh python process: torch's DTensor caches sharding
decisions (and the ``DeviceMesh`` objects inside them) across process groups, so a second rank
traced in the same process can silently reuse the first rank's mesh coordinate (measured with
torch 2.13: ``loss_parallel``'s vocab offsets came out as rank 0's on rank 1). A child process
per trace makes every trace the program of the rank it names, and keeps user code out of the
process that decides the verdict.

The child sends back :func:`dump` of its :class:`~spec_lang.torch_frontend.capture.Trace`: every
node's op, target name, arguments (node references by name), the shape and dtype of its value
and its stack trace, the small constant tensors the graph reads, and the roles of the inputs
and outputs. :func:`load_trace` rebuilds a ``torch.fx`` graph whose values are ``meta`` tensors
of the same shapes, which is all the lowering reads.
"""

from __future__ import annotations

import io
import json
import operator
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spec_lang.errors import PlanError

NEEDS_CPU = b"NEEDS_CPU\n"   # the tracing child's answer for pp_capture.NeedsCpu

__all__ = ["dump", "load_trace", "run_jobs", "Pool", "Job", "GraphHolder", "ProcessGroupRef",
           "ReduceOpRef"]


class GraphHolder:
    """A stand-in for the ``GraphModule``: ``.graph`` and the constants ``get_attr`` reads."""

    def __init__(self, graph: Any, consts: Mapping[str, Any]):
        self.graph = graph
        for k, v in consts.items():
            setattr(self, k, v)

    @property
    def code(self) -> str:
        return str(self.graph)


def _enc(x: Any) -> Any:
    import torch
    import torch.fx as fx

    if isinstance(x, fx.Node):
        return ("node", x.name)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_enc(y) for y in x])
    if isinstance(x, dict):
        return ("dict", {k: _enc(v) for k, v in x.items()})
    if isinstance(x, torch.dtype):
        return ("dtype", str(x))
    if isinstance(x, torch.device):
        return ("device", str(x))
    if isinstance(x, torch.layout):
        return ("layout", str(x))
    if isinstance(x, torch.memory_format):
        return ("memfmt", str(x))
    if isinstance(x, (int, float, bool, str)) or x is None:
        return x
    return ("repr", repr(x))


def _val(v: Any) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        # the strides too: an all-reduce of a tensor that is not contiguous, a _reshape_alias
        # of one, are read by their layout (adversarial round 27, R27-1)
        try:
            stride = tuple(int(s) for s in v.stride())
        except (RuntimeError, TypeError):      # a layout without strides (sparse, nested)
            stride = None
        return ("t", tuple(int(s) for s in v.shape), str(v.dtype), stride)
    if isinstance(v, (list, tuple)):
        return ("l", [_val(x) for x in v])
    if isinstance(v, (int, float, bool)):
        return ("s", v)
    return None


def dump(trace: Any) -> bytes:
    """The trace as bytes (pickle of plain python data; no torch objects)."""
    import torch

    gm = trace.gm
    nodes = []
    consts = {}
    for n in gm.graph.nodes:
        nodes.append({
            "name": n.name, "op": n.op, "target": str(n.target) if n.op != "get_attr"
            else n.target, "args": _enc(n.args), "kwargs": _enc(dict(n.kwargs)),
            "val": _val(n.meta.get("val")), "stack": n.meta.get("stack_trace"),
        })
        if n.op == "get_attr":
            v = getattr(gm, n.target)
            if isinstance(v, torch.Tensor) and v.device.type != "meta" and v.numel() <= 4096:
                consts[n.target] = ("tensor", v.detach().cpu().tolist(), str(v.dtype),
                                    tuple(v.shape))
            elif isinstance(v, torch.Tensor):
                consts[n.target] = ("meta", tuple(v.shape), str(v.dtype))
            elif isinstance(v, torch.ScriptObject):
                consts[n.target] = _script_object(v)
            elif isinstance(v, ProcessGroupRef):
                consts[n.target] = ("pg", v.group_name)
            elif isinstance(v, ReduceOpRef):
                consts[n.target] = ("redop", v.op)
    data = {"nodes": nodes, "consts": consts,
            "inputs": [asdict(r) for r in trace.inputs],
            "outputs": [asdict(r) for r in trace.outputs],
            "mesh": trace.mesh, "coords": trace.coords, "groups": trace.groups,
            "sizes": trace.sizes, "tied": trace.tied, "styles": trace.styles,
            "after": trace.after, "pp": trace.pp, "new_groups": trace.new_groups,
            "state_read": trace.state_read}
    return pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass(frozen=True)
class ProcessGroupRef:
    """A c10d ``ProcessGroup`` a graph reads (``dist.all_reduce(t, group=...)``): its name."""

    group_name: str


@dataclass(frozen=True)
class ReduceOpRef:
    """A c10d ``ReduceOp`` a graph reads: its enum value (0 sum, 1 avg, 4 max...)."""

    op: int


def _script_object(v: Any) -> Any:
    import torch.distributed as dist

    kind = v._type().qualified_name() if hasattr(v, "_type") else ""  # noqa: SLF001
    if kind.endswith("c10d.ProcessGroup"):
        return ("pg", dist.ProcessGroup.unbox(v).group_name)
    if kind.endswith("c10d.ReduceOp"):
        return ("redop", int(v.op()))
    return ("opaque", kind)


def _target(name: str) -> Any:
    import torch

    if name == "<built-in function getitem>":
        return operator.getitem
    ns, rest = name.split(".", 1)
    op, overload = rest.rsplit(".", 1)
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


def _dtype(s: str) -> Any:
    import torch

    return getattr(torch, s.split(".", 1)[1])


def _dec(x: Any, env: Mapping[str, Any]) -> Any:
    import torch

    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str):
        tag, v = x
        if tag == "node":
            return env[v]
        if tag in ("list", "tuple", "immutable_list"):
            items = [_dec(y, env) for y in v]
            return tuple(items) if tag == "tuple" else list(items)
        if tag == "dict":
            return {k: _dec(y, env) for k, y in v.items()}
        if tag == "dtype":
            return _dtype(v)
        if tag == "device":
            return torch.device(v)
        if tag == "layout":
            return getattr(torch, v.split(".", 1)[1])
        if tag == "memfmt":
            return getattr(torch, v.split(".", 1)[1])
        if tag == "repr":
            return v
    return x


def _meta_val(v: Any) -> Any:
    import torch

    if v is None:
        return None
    if v[0] == "t":
        if len(v) > 3 and v[3] is not None:
            return torch.empty_strided(v[1], v[3], dtype=_dtype(v[2]), device="meta")
        return torch.empty(v[1], dtype=_dtype(v[2]), device="meta")
    if v[0] == "l":
        return [_meta_val(x) for x in v[1]]
    return v[1]


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global: a blob holding anything but plain containers
    and scalars raises ``pickle.UnpicklingError`` instead of calling code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"trace data names {module}.{name}: only plain data is "
                                     "read from a capture child")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("trace data with a persistent id")


def load_trace(blob: bytes) -> Any:
    """Rebuild a :class:`~spec_lang.torch_frontend.capture.Trace` from :func:`dump` bytes."""
    import torch
    import torch.fx as fx

    from spec_lang.torch_frontend.capture import InputRole, OutputRole, Trace

    # the child ran the user's plan file, which could have written these bytes: only plain
    # data (containers and scalars, which pickle builds without looking up any callable) is
    # read, never an object whose class pickle would import and call
    data = _PlainUnpickler(io.BytesIO(blob)).load()
    g = fx.Graph()
    env: dict[str, Any] = {}
    consts = {}
    for k, c in data["consts"].items():
        if c[0] == "tensor":
            consts[k] = torch.tensor(c[1], dtype=_dtype(c[2])).reshape(c[3])
        elif c[0] == "meta":
            consts[k] = torch.empty(c[1], dtype=_dtype(c[2]), device="meta")
        elif c[0] == "pg":
            consts[k] = ProcessGroupRef(c[1])
        elif c[0] == "redop":
            consts[k] = ReduceOpRef(c[1])
        else:
            consts[k] = c
    for nd in data["nodes"]:
        op = nd["op"]
        if op == "placeholder":
            n = g.placeholder(nd["name"])
        elif op == "get_attr":
            n = g.get_attr(nd["target"])
        elif op == "call_function":
            n = g.call_function(_target(nd["target"]), _dec(nd["args"], env),
                                _dec(nd["kwargs"], env))
        elif op == "output":
            n = g.output(_dec(nd["args"], env)[0])
        else:
            raise PlanError(f"unexpected graph node {op}")
        n.name = nd["name"]
        n.meta["val"] = _meta_val(nd["val"])
        if nd["stack"]:
            n.meta["stack_trace"] = nd["stack"]
        env[nd["name"]] = n
    return Trace(gm=GraphHolder(g, consts),
                 inputs=[InputRole(**{**r, "placements": tuple(r["placements"]),
                                      "global_shape": tuple(r["global_shape"])})
                         for r in data["inputs"]],
                 outputs=[OutputRole(**{**r, "placements": tuple(r["placements"])})
                          for r in data["outputs"]],
                 mesh=data["mesh"], coords=data["coords"], groups=data["groups"],
                 sizes=data["sizes"], tied=data["tied"], styles=data.get("styles", {}),
                 after=data.get("after", {}), pp=data.get("pp"),
                 new_groups=data.get("new_groups", {}),
                 state_read=bool(data.get("state_read", True)))


class Job:
    """One trace to capture: the train file (its name and the bytes to run), the sizes, the
    rank's coordinates (None: spec) and the mesh they are on."""

    def __init__(self, path: str, sizes: Mapping[str, int], coords: Mapping[str, int] | None,
                 source: bytes, mesh: Mapping[str, int] | None = None,
                 pp_in: Sequence[Any] | None = None, cpu: bool = False, state: bool = True):
        self.path, self.sizes, self.coords = path, dict(sizes), (None if coords is None
                                                                 else dict(coords))
        self.source, self.mesh = source, dict(mesh or {})
        # a later pipeline stage's input (shape, dtype, stride, requires_grad) per tensor, from
        # the previous stage's trace (pp_capture)
        self.pp_in = None if pp_in is None else [[list(s), d, list(st), bool(rg)]
                                                 for s, d, st, rg in pp_in]
        # trace on fake cpu tensors (a pipelined step); set when a child answers NEEDS_CPU
        self.cpu = cpu or pp_in is not None
        # read the state the step leaves (capture's ``state``): False at the probe sizes
        self.state = state


_ROOT = str(Path(__file__).resolve().parents[2])
# like proofs/isolation.py's child: ``-I`` (no PYTHON* variables, no user site, no script
# directory), this installation first on sys.path; in its parent's process group; ends without
# the interpreter's teardown once the trace is written (worker.run)
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from spec_lang.torch_frontend.worker import run; run(sys.argv[2:])")


def run_jobs(jobs: Sequence[Job], *, workers: int = 2, timeout_s: float = 1800.0
             ) -> list[Any]:
    """Capture every job in its own child process (at most ``workers`` at a time).

    Returns:
        the traces, in the order of ``jobs``.

    Raises:
        PlanError: a child reported a user error (its message, with the user's line), or died.
    """
    with Pool(workers=workers, timeout_s=timeout_s) as pool:
        ids = [pool.submit(j) for j in jobs]
        return [pool.result(i) for i in ids]


class Pool:
    """Capture children started in the order jobs are submitted, at most ``workers`` at a time,
    each a fresh interpreter (``python -I``); a job submitted while others run starts as soon
    as a child ends, so no core waits for a batch's slowest trace (``frontend.capture_all``
    submits the traces it needs next while the first ones run). Leaving the ``with`` block
    kills the children still running and removes their files."""

    def __init__(self, *, workers: int = 2, timeout_s: float = 1800.0) -> None:
        self.workers, self.timeout_s = max(1, workers), timeout_s
        self.jobs: list[Job] = []
        self.results: dict[int, Any] = {}
        self.pending: list[int] = []
        self.running: list[tuple[int, Any, str, float]] = []
        self.tmp = tempfile.mkdtemp(prefix="shardproof-trace-")

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: Any) -> None:
        for _, p, _, _ in self.running:
            p.kill()
            p.wait()
            p.errf.close()
        for f in Path(self.tmp).glob("*"):
            f.unlink()
        os.rmdir(self.tmp)

    def submit(self, job: Job) -> int:
        """Queue ``job``; its index for :meth:`result`."""
        self.jobs.append(job)
        self.pending.append(len(self.jobs) - 1)
        self._start()
        return len(self.jobs) - 1

    def result(self, i: int) -> Any:
        """Job ``i``'s trace, once its child has ended.

        Raises:
            PlanError: a child reported a user error, died or ran over the time limit (any
                running job's, not only ``i``'s: the capture fails as soon as one does).
        """
        while i not in self.results:
            time.sleep(0.05)
            self._poll()
            self._start()
        return self.results[i]

    def _start(self) -> None:
        while self.pending and len(self.running) < self.workers:
            i = self.pending.pop(0)
            job = self.jobs[i]
            out = os.path.join(self.tmp, f"{i}.pkl")
            src = os.path.join(self.tmp, f"{i}.src")
            Path(src).write_bytes(job.source)
            spec = json.dumps({"sizes": job.sizes, "coords": job.coords, "mesh": job.mesh,
                               "source": src, "pp_in": job.pp_in, "cpu": job.cpu,
                               "state": job.state})
            errf = open(out + ".err", "wb")  # noqa: SIM115 -- closed when the child ends
            p = subprocess.Popen(  # noqa: S603 -- our own module, argv built here
                [sys.executable, "-I", "-c", _BOOT, _ROOT, job.path, spec, out],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf)
            p.errf = errf  # type: ignore[attr-defined]
            self.running.append((i, p, out, time.monotonic()))

    def _poll(self) -> None:
        for item in list(self.running):
            i, p, out, t0 = item
            job = self.jobs[i]
            rc = p.poll()
            if rc is None:
                if time.monotonic() - t0 > self.timeout_s:
                    raise PlanError(f"{job.path}:1: capturing a trace took longer than "
                                    f"{self.timeout_s:.0f} s")
                continue
            self.running.remove(item)
            p.errf.close()
            err = Path(out + ".err").read_text(errors="replace")
            if rc != 0 or not os.path.exists(out):
                raise PlanError(f"{job.path}:1: the capture process failed (exit {rc}): "
                                f"{err.strip().splitlines()[-1] if err.strip() else ''}")
            blob = Path(out).read_bytes()
            if blob == NEEDS_CPU and not job.cpu:
                # a pipelined step: traced again, on fake cpu tensors, in a fresh process
                job.cpu = True
                os.unlink(out)
                self.pending.insert(0, i)
                continue
            if blob == NEEDS_CPU:
                raise PlanError(f"{job.path}:1: a pipeline stage could not be traced "
                                "on fake cpu tensors")
            if blob.startswith(b"ERROR\n"):
                raise PlanError(blob[6:].decode())
            self.results[i] = load_trace(blob)
