"""The `local-real` cluster preset: constants measured on real stage processes of this machine.

`calibrate` starts the real multi-process pipeline (trainer.distributed) for the configuration at
hand and measures every constant the simulator's cluster model needs, each from the mechanism
the real run uses, so that the simulator predicts real runs (docs/real-runs.md):

| constant | measured as |
|---|---|
| `stage_forward_s`, `stage_backward_s` | median CPU seconds (thread time) of each stage's operations inside the pipelined iterations, receive and send included (one torch thread per process); stage 0 = embedding + head, as the `local` preset |
| `host_cores`, `host_load` | the cores this process may run on (`sched_getaffinity`) and the other programs' runnable threads as the pipeline's own operations saw them (`host_load_from_ops`: the CPU share each operation got and how many of the run's operations computed at the same moment; simulator/host.py: share = cores / (k + load)). The share k = 1..S+1 processes get when they compute flat out (`burn`) is recorded beside it: it is much lower (load ~15 against ~1.5 here), because Linux's scheduler favours a process that wakes from sleep, as a pipeline stage does after each message, over the other programs' long-running threads |
| `default_link` | latency and bandwidth fitted to gloo round trips between two stage processes at the activation size and 4x it: one way = RTT / 2 = latency + bytes / bandwidth |
| `storage_bytes_per_s` | whole-model checkpoint plans (every stage writes and fsyncs its `.npy`): bytes / seconds, median of the saves and the load |
| `restart_delay_s` | SIGKILL a stage, `replace` it from a warm spare, run a one-step plan: median seconds from the kill to the stage being usable |
| `update_s` | median seconds of the commit phase: clipping, the Adam step and the driver's round trip |
| `activation_bytes`, `stage_gradient_bytes` | the trainer's sizes (B T C fp32; stage parameters) |

The preset is JSON (`Cluster.to_dict`); `shardproof calibrate --out FILE` writes it and
`--cluster local-real --calibration FILE` uses it. Nothing here is fitted to the runs it is then
compared with: calibration runs failure-free, without a strategy, in its own processes.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from simulator.cluster import Cluster, LinkSpec
from simulator.errors import SimulationError

__all__ = ["calibrate", "stage_times", "fit_link", "fit_host_load", "host_cores", "host_load_from_ops",
           "message_delay_from_ops"]

FP32_BYTES = 4


def stage_times(ops: list[dict[int, list[list[float]]]], n_stages: int,
                column: int = 5) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-stage (forward_s, backward_s) per micro-batch from iterations' operation timings.

    `ops`: one dict per iteration, stage -> [kind, micro_batch, position, compute_s, wait_s, cpu_s];
    `column` 5 = CPU seconds (the default), 3 = wall seconds of compute. A stage's time per
    micro-batch is the sum over the positions it serves for that micro-batch (stage 0: the embedding
    and the head), then the median over micro-batches and iterations.
    """
    per: dict[tuple[int, int], list[float]] = defaultdict(list)  # (stage, kind) -> seconds per micro-batch
    for iteration in ops:
        for stage, records in iteration.items():
            sums: dict[tuple[int, int], float] = defaultdict(float)
            for record in records:
                sums[(int(record[0]), int(record[1]))] += record[column]
            for (kind, _mb), seconds in sums.items():
                per[(int(stage), kind)].append(seconds)
    if any((s, k) not in per for s in range(n_stages + 1) for k in (0, 1)):
        raise SimulationError("calibration: some stage has no timed operation")
    fwd = tuple(statistics.median(per[(s, 0)]) for s in range(n_stages + 1))
    bwd = tuple(statistics.median(per[(s, 1)]) for s in range(n_stages + 1))
    return fwd, bwd


def fit_link(rtt_s: dict[int, float]) -> LinkSpec:
    """LinkSpec through the one-way times RTT/2 at two or more sizes (float32 counts -> bytes), least squares."""
    xs = [n * FP32_BYTES for n in sorted(rtt_s)]
    ys = [rtt_s[n] / 2.0 for n in sorted(rtt_s)]
    if len(xs) < 2:
        raise SimulationError("fit_link needs round trips at two sizes or more")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    slope = max(slope, 1e-12)  # noise can make two nearby sizes look free; never an infinite bandwidth
    latency = max(0.0, my - slope * mx)
    return LinkSpec(latency_s=latency, bytes_per_s=1.0 / slope)


def host_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0))


def fit_host_load(rates: dict[int, float], cores: float) -> float:
    """Other programs' runnable threads from the CPU share of k processes computing at once.

    share(k) = min(1, cores / (k + load)) (simulator/host.py), so each k with share < 0.98 gives
    load = cores / share - k; the median of those, or 0 when every share is ~1 (an idle host).
    """
    loads = [cores / r - k for k, r in rates.items() if 0 < r < 0.98]
    return max(0.0, statistics.median(loads)) if loads else 0.0


def host_load_from_ops(ops: list[dict[int, list[list[float]]]], cores: float) -> float:
    """Other programs' runnable threads while a run went on, read off the run's own operations.

    The fair share r = cores / (k + load) (simulator/host.py) with, over all operations, the CPU
    share they got in aggregate, r = sum(compute CPU seconds) / sum(compute wall seconds), and
    k = how many of the run's operations computed at once, averaged over the same wall seconds
    (each operation counts the operations computing at its midpoint, itself included, all stages
    of the iteration). Aggregates rather than medians: the host's load comes in bursts, and the
    slow stretches are the ones that cost time. `ops`: one dict per iteration, stage ->
    [kind, mb, pos, compute_s, wait_s, cpu_s, compute_cpu_s, start, ...]. 0 when the operations ran
    at full speed (a share >= 0.98 says only load <= cores - k).
    """
    cpu = wall = k_wall = 0.0
    for iteration in ops:
        spans = [(r[7], r[7] + r[3], r[6]) for records in iteration.values() for r in records if len(r) >= 8]
        for start, end, c in spans:
            mid = (start + end) / 2
            k = sum(1 for s, e, _c in spans if s <= mid < e)
            cpu, wall, k_wall = cpu + c, wall + (end - start), k_wall + k * (end - start)
    if wall <= 0 or cpu / wall >= 0.98:
        return 0.0
    return max(0.0, cores / (cpu / wall) - k_wall / wall)


def message_delay_from_ops(ops: list[dict[int, list[list[float]]]]) -> float | None:
    """Mean seconds a message took to reach a process already waiting for it, over a run's operations.

    The receiver's clock minus the send time carried in the frame (trainer/distributed/wire.py), on
    the system-wide monotonic clock: gloo's transfer plus the receiver's wake-up, which on a loaded
    host is most of it. None when no message found its receiver waiting.
    """
    delays = [r[8] for iteration in ops for records in iteration.values() for r in records
              if len(r) >= 9 and r[8] >= 0.0]
    return statistics.fmean(delays) if delays else None


def calibrate(trainer_config: dict[str, Any], workdir: Path, *, iterations: int = 30, warmup: int = 5,
              schedule: str = "gpipe", spares: int = 2, restarts: int = 3, cache_dir: Path | None = None,
              progress: Any = None) -> Cluster:
    """Measure the `local-real` cluster for `trainer_config` on this machine (module docstring)."""
    from trainer.api import TrainerConfig
    from trainer.distributed import DistributedPipeline
    from trainer.strategies.plan import LoadCheckpoint, Reinit, SaveCheckpoint

    if iterations <= warmup:
        raise SimulationError(f"calibration needs more iterations ({iterations}) than warm-up ({warmup})")
    cfg = TrainerConfig(**trainer_config)
    say = progress or (lambda _msg: None)
    with DistributedPipeline(cfg, workdir, cache_dir=cache_dir, schedule=schedule, spares=spares) as pipe:
        say(f"calibration: {iterations} failure-free iterations")
        outcomes = [pipe.train_step() for _ in range(iterations)][warmup:]
        fwd, bwd = stage_times([o.ops for o in outcomes], cfg.n_stages)
        update_s = statistics.median(o.commit_s for o in outcomes)
        say("calibration: host CPU share")
        rates = pipe.measure_host(0.5)
        numel = pipe.activation_bytes() // FP32_BYTES
        say("calibration: links")
        link = fit_link(pipe.measure_link(1, 2, (numel, 4 * numel), repeats=20))
        say("calibration: storage")
        storage = [pipe.run_plan((SaveCheckpoint(),)) for _ in range(3)] + [pipe.run_plan((LoadCheckpoint(),))]
        storage_bps = statistics.median(r.storage_bytes / r.seconds for r in storage)
        say(f"calibration: {restarts} restarts from warm spares")
        restart = []
        for k in range(restarts):
            pipe.wait_for_spares()  # measure a warm restart: the spare has finished starting
            stage = 1 + k % cfg.n_stages
            t0 = time.perf_counter()
            pipe.kill([stage])
            pipe.replace([stage])
            pipe.run_plan((Reinit(stage),))
            restart.append(time.perf_counter() - t0)
    n = cfg.n_stages + 1
    sizes = [pipe.stage_param_bytes(s) for s in range(n)]
    return Cluster(
        name="local-real", stage_forward_s=fwd, stage_backward_s=bwd, activation_bytes=pipe.activation_bytes(),
        stage_gradient_bytes=tuple(sizes), dp_replicas=1, default_link=link, storage_bytes_per_s=storage_bps,
        restart_delay_s=statistics.median(restart), head_on_stage0=True, update_s=update_s,
        host_cores=float(host_cores()), host_load=host_load_from_ops([o.ops for o in outcomes], host_cores()),
        sources={
            "host_cores/host_load": f"measured: the CPU share of the pipeline's own operations, share = cores / (k + load) "
                                    f"(flat-out share of k = 1..{n} processes: "
                                    f"{ {k: round(r, 3) for k, r in rates.items()} }, load "
                                    f"{fit_host_load(rates, host_cores()):.1f})",
            "stage_forward_s/stage_backward_s": f"measured: median CPU seconds per micro-batch over {len(outcomes)} "
                                                f"pipelined {schedule} iterations, one process per stage",
            "default_link": "measured: gloo round trips between stages 1 and 2 at 1x and 4x the activation size",
            "storage_bytes_per_s": "measured: 3 whole-model .npy checkpoint saves (fsync) and 1 load",
            "restart_delay_s": f"measured: SIGKILL + warm-spare replacement + first plan, median of {restarts}",
            "update_s": "measured: median commit phase (clip, Adam step, driver round trip)",
            "activation_bytes/stage_gradient_bytes": "the trainer's sizes",
        })
