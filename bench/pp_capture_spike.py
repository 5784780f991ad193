"""Spike (issue 11, pipelining groundwork): can the front end's fake-process-group route run a
``PipelineStage`` + schedule step per rank, which actions does each rank execute, and how do
the point-to-point transfers appear in a ``make_fx`` graph? Measured, never asserted; not part
of ``prove`` (``docs/torch.md``, "Pipelining"; the front end's capture is
``spec_lang/torch_frontend/pp_capture.py``).

For each rank of ``llama_pp_dp.py``'s mesh (pp 2 x dp 2), under ``world.fake_world``: the
rank's Llama stage (``examples/torch/llama_pipeline.py``) with *static* stage metadata
(``input_args`` / ``output_args`` / ``output_grads`` / ``input_grads``), the schedule's
static/dynamic vote bypassed (``_warmup_p2p`` patched to STATIC: under the fake PG the vote's
``.item()`` is garbage eagerly and a data-dependent guard under ``make_fx``), then one step
(schedule, hand-written DP all-reduce) run eagerly or traced by ``make_fx``. Recorded: the
executed events (``F<mb>``, ``B<mb>``, ``SEND->peer:shape``, ``RECV->peer:shape``,
``REDUCE_GRAD/<factor>``), the schedule's own ``pipeline_order`` for the rank, and, traced,
the graph's node count and its communication ops with their arguments.

    python bench/pp_capture_spike.py [gpipe|1f1b] [cpu|meta] [eager|fx] [--json PATH]

It patches torch's pipelining classes in this process only.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "torch"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe  # noqa: E402
from torch.distributed.pipelining import schedules as S  # noqa: E402
from torch.distributed.pipelining import stage as ST  # noqa: E402
from torch.distributed.pipelining._utils import InferenceMode  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import llama_pp_dp as tf  # noqa: E402
from llama_pipeline import pipeline_llama  # noqa: E402
from spec_lang.torch_frontend.world import fake_world  # noqa: E402

SCHEDULES = {"gpipe": (ScheduleGPipe, 2), "1f1b": (Schedule1F1B, 4)}
EVENTS: list[str] = []


def _instrument() -> None:
    """Record executed events; bypass the static/dynamic vote (every stage STATIC)."""
    def rec(name: str, fn: Any) -> Any:
        def w(self: Any, *a: Any, **k: Any) -> Any:
            EVENTS.append(f"{name}{a[0] if a else ''}")
            return fn(self, *a, **k)
        return w

    base = ST._PipelineStageBase  # noqa: SLF001
    base.forward_one_chunk = rec("F", base.forward_one_chunk)
    base.backward_one_chunk = rec("B", base.backward_one_chunk)
    reduce_grad = base.perform_reduce_grad

    def perform_reduce_grad(self: Any, factor: int) -> Any:
        EVENTS.append(f"REDUCE_GRAD/{factor}")
        return reduce_grad(self, factor)

    base.perform_reduce_grad = perform_reduce_grad
    batch_p2p = S._batch_p2p  # noqa: SLF001

    def p2p(ops: list[Any], desc: str | None = None) -> Any:
        for o in ops:
            kind = "SEND" if o.op is dist.isend else "RECV"
            EVENTS.append(f"{kind}->{o.peer}:{tuple(o.tensor.shape)}")
        return batch_p2p(ops, desc)

    S._batch_p2p = p2p  # noqa: SLF001

    def warmup(self: Any, stages: list[Any], has_backward: bool,  # noqa: ARG001
               p2p_done: bool) -> None:  # noqa: ARG001
        for s in stages:
            s._inference_mode = InferenceMode.STATIC  # noqa: SLF001

    S._PipelineSchedule._warmup_p2p = warmup  # noqa: SLF001


def _set(mod: torch.nn.Module, dotted: str, value: Any, buffer: bool = False) -> None:
    *path, leaf = dotted.split(".")
    for q in path:
        mod = getattr(mod, q)
    (mod._buffers if buffer else mod._parameters)[leaf] = (  # noqa: SLF001
        value if buffer else torch.nn.Parameter(value))


def one_rank(rank: int, schedule: str, device: str, mode: str) -> dict[str, Any]:
    """Run (or trace) one step of ``rank``; the measurements as a dict."""
    mesh = dict(tf.MESH)
    coords = {"pp": rank // mesh["dp"], "dp": rank % mesh["dp"]}
    cls, n_mb = SCHEDULES[schedule]
    EVENTS.clear()
    t0 = time.perf_counter()
    out: dict[str, Any] = {"coords": coords}
    with fake_world(mesh, coords) as w:
        sizes, dev = dict(tf.SIZES), torch.device(device)
        with dev:
            model = tf.build_model(sizes)
        stage_mod = pipeline_llama(model, w.mesh)
        first, last = coords["pp"] == 0, coords["pp"] == mesh["pp"] - 1
        mb, seq, dim = sizes["batch"] // mesh["dp"] // n_mb, sizes["seq"], model.args.dim
        # the static metadata's requires_grad decides whether the stage computes and sends its
        # input's gradient: without it torch sends zeros upstream (measured: a ``zero_``
        # buffer is what the traced ``c10d.send`` of the last stage carries)
        x = (torch.zeros(mb, seq, dtype=torch.long, device=dev) if first
             else torch.zeros(mb, seq, dim, device=dev, requires_grad=True))
        y = torch.zeros(mb, seq, sizes["vocab"] if last else dim, device=dev)
        stage = PipelineStage(stage_mod, coords["pp"], mesh["pp"], dev, input_args=x,
                              output_args=y, output_grads=None if last else torch.zeros_like(y),
                              input_grads=None if first else torch.zeros_like(x),
                              group=w.mesh["pp"].get_group())
        sched = cls(stage, n_microbatches=n_mb, loss_fn=tf.loss_fn)
        params = dict(stage_mod.named_parameters())
        bufs = ["rope_cos", "rope_sin"]
        tokens = torch.zeros(sizes["batch"] // mesh["dp"], seq, dtype=torch.long, device=dev)

        def step(flat: list[torch.Tensor]) -> list[torch.Tensor]:
            it = iter(flat)
            for n in params:
                _set(stage_mod, n, next(it))
            for b in bufs:
                _set(stage_mod, b, next(it), buffer=True)
            toks, labels = next(it), next(it)
            losses: list[torch.Tensor] = []
            sched.step(*((toks,) if first else ()), target=labels, losses=losses)
            for p in stage_mod.parameters():
                dist.all_reduce(p.grad, group=w.mesh["dp"].get_group())
                p.grad.div_(mesh["dp"])
            return [p.grad for p in stage_mod.parameters()] + losses

        flat = ([p.detach().clone() for p in params.values()]
                + [getattr(stage_mod, b) for b in bufs] + [tokens, torch.zeros_like(tokens)])
        try:
            if mode == "fx":
                gm = make_fx(step, tracing_mode="fake")(flat)
                calls = [n for n in gm.graph.nodes if n.op == "call_function"]
                ops = collections.Counter(str(n.target) for n in calls)
                out["nodes"] = len(gm.graph.nodes)
                out["comm_ops"] = {k: v for k, v in ops.items() if "c10d" in k}
                out["p2p_nodes"] = [f"{n.name} = {n.target}{tuple(str(a) for a in n.args)}"
                                    for n in calls if str(n.target).startswith("c10d.")
                                    and ("send" in str(n.target) or "recv" in str(n.target))]
            else:
                step(flat)
            out["ok"] = True
        except Exception as e:  # noqa: BLE001 -- measured, not raised
            out["ok"] = False
            out["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}"
            out["cause"] = repr(e.__cause__)[:300] if e.__cause__ else None
        out["events"] = list(EVENTS)
        order = getattr(sched, "pipeline_order", None) or {}
        out["pipeline_order"] = [str(a) for a in order.get(coords["pp"], []) if a is not None]
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("schedule", nargs="?", default="gpipe", choices=sorted(SCHEDULES))
    ap.add_argument("device", nargs="?", default="cpu", choices=["cpu", "meta"])
    ap.add_argument("mode", nargs="?", default="fx", choices=["eager", "fx"])
    ap.add_argument("--json", help="write the measurements here")
    a = ap.parse_args(argv)
    _instrument()
    res = {r: one_rank(r, a.schedule, a.device, a.mode) for r in range(4)}
    for r, v in res.items():
        print(f"rank {r} {v['coords']}: ok={v['ok']} {v.get('error') or ''} "
              f"{v['seconds']} s nodes={v.get('nodes')} {v.get('comm_ops') or ''}")
        print("  executed:", " ".join(v["events"]))
        print("  pipeline_order:", " ".join(v["pipeline_order"]))
        for line in v.get("p2p_nodes", []):
            print("   ", line)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
