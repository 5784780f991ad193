"""DistributedPipeline: the driver of a real run, one OS process per pipeline stage.

The driver starts a process per stage (0 = embedding stage, 1..S transformer stages) and a few warm
spares (processes that imported torch and wait, as a pool of standby nodes does), and keeps what
no stage may lose: the iteration count and the data position (the training sampler's state, which
it hands to stage 0 every iteration). Everything else lives in the stage processes.

An iteration (`train_step`) is a two-phase commit:

    train   every stage runs its operations of the schedule (trainer.distributed.pipeline_schedule),
            activations and gradients crossing processes over gloo; each replies done or aborted
    commit  only when every stage is done and none was killed: clip, Adam step, grad norm back;
            otherwise every survivor drops its gradients (the iteration's partial work is lost)

so an iteration's result exists once or not at all. Failures are real: `kill(stages)` sends
SIGKILL (from `train_step(kill_after_s=...)` in the middle of an iteration, or between
iterations), `replace(stages)` brings a spare (or a new process) in *empty* and forms the next
generation's gloo group, and `run_plan(steps)` carries out a recovery plan
(trainer.strategies.plan) with real transfers between the processes, checkpoint files on disk and
re-initialisations with the driver's salts (the same sequence as `PipelineTrainer.reinit_stage`).

The driver is also the `PipelineView` the planners read (stage sizes).
"""

from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer.api import StepResult, TrainerConfig
from trainer.data import default_cache_dir, sampler_generator
from trainer.distributed.control import WorkerLost
from trainer.distributed.launcher import DistributedError, Launcher, WorkerHandle, wait_any
from trainer.distributed.pipeline_schedule import SCHEDULES, routes, stage_programs
from trainer.errors import TrainerError
from trainer.schedule import learning_rate
from trainer.strategies.base import Restart, Rollback
from trainer.strategies.plan import (
    Hold,
    LoadCheckpoint,
    MarkDataPosition,
    Rebuild,
    Reinit,
    RestoreDataPosition,
    SaveCheckpoint,
    SetLrScale,
    Step,
)

__all__ = ["TrainOutcome", "Restarted", "PlanRun", "DistributedPipeline"]

FP32_BYTES = 4
READY_TIMEOUT_S = 600.0  # importing torch on a loaded 2-core machine took 3-5 s; generous bound


@dataclass(frozen=True)
class TrainOutcome:
    """One `train_step`: committed with its result, or aborted with the stages lost during it."""

    committed: bool
    result: StepResult | None
    lost: tuple[int, ...]  # stages whose process died during the iteration (killed or crashed)
    pipeline_s: float  # train sent -> every stage replied
    commit_s: float  # commit (or abort) sent -> every stage acknowledged
    seconds: float  # the whole call
    ops: dict[int, list[list[float]]] = field(default_factory=dict)  # stage -> [kind, mb, pos, compute, wait, cpu s]


@dataclass(frozen=True)
class Restarted:
    """Replacement processes joined for `stages`."""

    stages: tuple[int, ...]
    seconds: float  # replace() called -> every replacement assigned and the new group formed
    from_spare: tuple[bool, ...]  # per stage: a warm spare (True) or a freshly started process


@dataclass(frozen=True)
class PlanRun:
    """A recovery or refresh plan carried out by the stage processes."""

    seconds: float
    transfers: tuple[tuple[int, int, int, float], ...]  # (src, dst, bytes, seconds) as the receivers measured
    storage_bytes: int


class DistributedPipeline:
    """One process per stage on localhost; see the module docstring. Use as a context manager."""

    def __init__(self, config: TrainerConfig, workdir: Path, *, cache_dir: Path | None = None,
                 schedule: str = "gpipe", spares: int = 1, timeout_s: float = 120.0):
        if not isinstance(config, TrainerConfig):
            raise TrainerError(f"DistributedPipeline needs a TrainerConfig, got {type(config).__name__}")
        if schedule not in SCHEDULES:
            raise TrainerError(f"unknown pipeline schedule {schedule!r}; known: {', '.join(SCHEDULES)}")
        if not isinstance(spares, int) or spares < 0:
            raise TrainerError(f"spares must be an int >= 0, got {spares!r}")
        self.config, self.n_stages, self.schedule = config, config.n_stages, schedule
        self.workdir = Path(workdir).resolve()  # stage processes get absolute paths
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cache_dir = default_cache_dir(cache_dir)
        self.n_spares, self.timeout_s = spares, float(timeout_s)
        self.iteration = 0
        self.sampler_state: dict[str, Any] = sampler_generator(config.seed).bit_generator.state
        self.reinit_count = 0
        self.generation = -1
        self._marks: dict[str, tuple[int, dict[str, Any]]] = {}
        self._workers: dict[int, WorkerHandle | None] = {}
        self._spares: list[WorkerHandle] = []
        self._launcher: Launcher | None = None
        self._programs: dict[tuple[bool, bool], tuple[Any, dict[int, list]]] = {}
        self._sizes = self._stage_sizes()

    # ------------------------------------------------------------------ the PipelineView planners read
    def _stage_sizes(self) -> list[tuple[int, int]]:
        from trainer.distributed.stage_runtime import stage_module

        out = []
        for stage in range(self.n_stages + 1):
            params = list(stage_module(self.config, stage).parameters())
            out.append((sum(p.numel() for p in params) * FP32_BYTES, len(params)))
        return out

    def stage_param_bytes(self, stage: int) -> int:
        """Bytes of the stage's parameters (fp32), as `PipelineTrainer.stage_param_bytes`."""
        return self._sizes[stage][0]

    def stage_optimizer_bytes(self, stage: int) -> int:
        """Adam state bytes (2 x parameters + one fp32 step per tensor), as `PipelineTrainer`."""
        return 2 * self._sizes[stage][0] + FP32_BYTES * self._sizes[stage][1]

    def activation_bytes(self) -> int:
        """One micro-batch hop: B * T * C fp32."""
        c = self.config
        return c.micro_batch_size * c.context * c.d_model * FP32_BYTES

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> DistributedPipeline:
        """Start the stage processes and the spares, build the stages, form generation 0."""
        store = self.workdir / "store"
        store.unlink(missing_ok=True)  # a store left by an earlier run would hand out its dead addresses
        self._launcher = Launcher(self.workdir, store)
        handles = {s: self._launcher.spawn() for s in range(self.n_stages + 1)}
        self._spares = [self._launcher.spawn() for _ in range(self.n_spares)]
        for h in handles.values():
            h.wait_ready(READY_TIMEOUT_S)
        self._workers = dict(handles)
        self._exchange({s: self._assign(s, initial=True) for s in handles})
        self._join()
        return self

    def reset(self) -> None:
        """Start over in the same processes: seeded stages, iteration 0, the initial data position.

        For tests and calibration, which need many short runs; every stage's state (weights, Adam,
        held copies) is rebuilt from the seed, nothing of the previous run is kept.
        """
        self.iteration, self.reinit_count, self._marks = 0, 0, {}
        self.sampler_state = sampler_generator(self.config.seed).bit_generator.state
        self._exchange({s: self._assign(s, initial=True) for s in self._workers})
        self._join()

    def close(self) -> None:
        """Stop every process of the run (idempotent)."""
        if self._launcher is not None:
            self._launcher.close()

    def __enter__(self) -> DistributedPipeline:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def pids(self) -> dict[int, int]:
        """Pid of each stage's current process."""
        return {s: h.pid for s, h in self._workers.items() if h is not None}

    def all_pids(self) -> list[int]:
        """Every live process of the run (stages and spares)."""
        return [] if self._launcher is None else self._launcher.pids()

    def _assign(self, stage: int, initial: bool) -> dict[str, Any]:
        return {"cmd": "assign", "stage": stage, "initial": initial, "config": asdict(self.config),
                "cache_dir": str(self.cache_dir)}

    def _join(self) -> None:
        self.generation += 1
        world = self.n_stages + 1
        self._exchange({s: {"cmd": "join", "generation": self.generation, "world": world,
                            "timeout_s": self.timeout_s} for s in self._workers})

    def _exchange(self, messages: dict[int, dict[str, Any]], timeout_s: float | None = None) -> dict[int, dict]:
        """Send each stage its message and collect every reply; a lost worker is a DistributedError."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        for stage, msg in messages.items():
            self._live(stage).send(msg)
        replies = {}
        deadline = time.monotonic() + timeout_s
        for stage in messages:
            try:
                replies[stage] = self._live(stage).recv(max(0.0, deadline - time.monotonic()))
            except WorkerLost:
                raise DistributedError(f"stage {stage}'s process died during {messages[stage]['cmd']}") from None
        return replies

    def _live(self, stage: int) -> WorkerHandle:
        handle = self._workers.get(stage)
        if handle is None:
            raise DistributedError(f"stage {stage} has no process (killed and not replaced)")
        return handle

    # ------------------------------------------------------------------ failures
    def kill(self, stages: tuple[int, ...] | list[int]) -> None:
        """SIGKILL the processes of `stages` (a real failure: all their state is gone)."""
        for stage in stages:
            handle = self._workers.get(stage)
            if handle is not None:
                self._launcher.kill(handle)
                self._workers[stage] = None

    def replace(self, stages: tuple[int, ...] | list[int]) -> Restarted:
        """New, empty processes for the killed `stages` (warm spares first); form the next generation."""
        t0 = time.perf_counter()
        from_spare = []
        for stage in stages:
            if self._workers.get(stage) is not None:
                raise DistributedError(f"stage {stage} still has a live process; kill it first")
            handle = self._spares.pop(0) if self._spares else self._launcher.spawn()
            from_spare.append(handle.ready or handle.alive() and handle.conn.poll(0))
            handle.wait_ready(READY_TIMEOUT_S)
            self._workers[stage] = handle
        self._exchange({s: self._assign(s, initial=False) for s in stages})
        self._join()
        while len(self._spares) < self.n_spares:  # refill the pool; they start while training goes on
            self._spares.append(self._launcher.spawn())
        return Restarted(tuple(stages), time.perf_counter() - t0, tuple(bool(x) for x in from_spare))

    # ------------------------------------------------------------------ training
    def _schedule(self, swap_odd: bool, forward_only: bool, n_micro_batches: int):
        key = (swap_odd, forward_only, n_micro_batches)
        if key not in self._programs:
            the_routes = routes(self.n_stages, n_micro_batches, swap_odd)
            programs = stage_programs(self.schedule, the_routes, forward_only=forward_only)
            self._programs[key] = (the_routes, {s: [list(astuple_op(op)) for op in prog]
                                                for s, prog in programs.items()})
        return self._programs[key]

    def train_step(self, *, swap_odd: bool = False, redundant: bool = False, kill_after_s: float | None = None,
                   kill_stages: tuple[int, ...] = ()) -> TrainOutcome:
        """One real iteration (module docstring). `kill_after_s`: SIGKILL `kill_stages` that many seconds
        after the iteration starts (or as soon as every stage replied, if sooner: still before the commit).
        """
        cfg = self.config
        the_routes, programs = self._schedule(swap_odd, False, cfg.n_micro_batches)
        lr = learning_rate(cfg, self.iteration)
        t0 = time.perf_counter()
        for stage, handle in self._workers.items():
            self._live(stage).send({"cmd": "train", "program": programs[stage], "routes": the_routes, "lr": lr,
                                    "sampler_state": self.sampler_state if stage == 0 else None,
                                    "redundant": redundant})
        replies: dict[int, dict] = {}
        lost: list[int] = []
        kill_at = None if kill_after_s is None else t0 + kill_after_s
        deadline = t0 + self.timeout_s
        while len(replies) + len(lost) < self.n_stages + 1:
            waiting = [h for s, h in self._workers.items() if s not in replies and s not in lost and h is not None]
            now = time.perf_counter()
            if kill_at is not None and now >= kill_at:
                self.kill(kill_stages)
                lost += [s for s in kill_stages if s not in lost]
                kill_at = None
                continue
            if now > deadline:
                raise DistributedError(f"iteration {self.iteration} did not finish within {self.timeout_s:.0f} s")
            limit = deadline - now if kill_at is None else min(deadline, kill_at) - now
            for handle in wait_any(waiting, max(0.0, limit)):
                stage = next(s for s, h in self._workers.items() if h is handle)
                try:
                    replies[stage] = handle.recv(self.timeout_s)
                except WorkerLost:
                    lost.append(stage)
                    self._launcher.kill(handle)
                    self._workers[stage] = None
        if kill_at is not None:  # every stage replied before the kill time: kill now, before the commit
            self.kill(kill_stages)
            lost += [s for s in kill_stages if s not in lost]
        pipeline_s = time.perf_counter() - t0
        ops = {s: r.get("ops", []) for s, r in replies.items()}
        t1 = time.perf_counter()
        if lost or any(r["status"] != "done" for r in replies.values()):
            if not lost:
                raise DistributedError(f"iteration {self.iteration} aborted without a lost stage: "
                                       f"{[r.get('reason') for r in replies.values()]}")
            alive = [s for s in replies if self._workers.get(s) is not None]
            self._exchange({s: {"cmd": "abort"} for s in alive})
            return TrainOutcome(False, None, tuple(sorted(lost)), pipeline_s, time.perf_counter() - t1,
                                time.perf_counter() - t0, ops)
        acks = self._exchange({s: {"cmd": "commit"} for s in self._workers})
        tokens = cfg.tokens_per_iteration
        result = StepResult(loss=replies[0]["loss_sum"] / tokens,
                            grad_norms=tuple(acks[s]["grad_norm"] for s in range(self.n_stages + 1)), tokens=tokens)
        self.sampler_state = replies[0]["sampler_state"]
        self.iteration += 1
        return TrainOutcome(True, result, (), pipeline_s, time.perf_counter() - t1, time.perf_counter() - t0, ops)

    def evaluate(self, n_batches: int = 4) -> float:
        """Mean validation cross-entropy (nats/token) through the real pipeline (PipelineTrainer.evaluate's)."""
        if n_batches < 1:
            raise TrainerError(f"evaluate needs n_batches >= 1, got {n_batches}")
        the_routes, programs = self._schedule(False, True, n_batches)
        replies = self._exchange({s: {"cmd": "evaluate", "program": programs[s], "routes": the_routes}
                                  for s in self._workers})
        return replies[0]["loss_sum"] / replies[0]["tokens"]

    # ------------------------------------------------------------------ plans
    def run_plan(self, steps: tuple[Step, ...] | list[Step]) -> PlanRun:
        """Carry out a plan: the driver's part (data position, iteration, salts), then the stages'."""
        t0 = time.perf_counter()
        ckpt = self.workdir / "checkpoint"
        worker_steps: list[dict[str, Any]] = []
        saves = False
        for step in steps:
            match step:
                case Restart() | Rollback():
                    pass  # replacements came in through replace(); the caller's clock re-runs iterations
                case MarkDataPosition(tag=tag):
                    self._marks[tag] = (self.iteration, copy.deepcopy(self.sampler_state))
                case RestoreDataPosition(tag=tag):
                    self.iteration, state = self._marks[tag]
                    self.sampler_state = copy.deepcopy(state)
                case SaveCheckpoint():
                    ckpt.mkdir(exist_ok=True)
                    worker_steps.append({"op": "SaveCheckpoint", "dir": str(ckpt)})
                    saves = True
                case LoadCheckpoint():
                    meta = json.loads((ckpt / "meta.json").read_text())
                    self.iteration, self.sampler_state = int(meta["iteration"]), meta["sampler_state"]
                    worker_steps.append({"op": "LoadCheckpoint", "dir": str(ckpt)})
                case Reinit(stage=stage, lr_scale=lr):
                    self.reinit_count += 1
                    worker_steps.append({"op": "Reinit", "stage": stage, "lr_scale": lr, "salt": self.reinit_count})
                case SetLrScale(stage=stage, lr_scale=lr):
                    worker_steps.append({"op": "SetLrScale", "stage": stage, "lr_scale": lr})
                case Hold(src=src, holder=holder, parts=parts):
                    worker_steps.append({"op": "Hold", "src": src, "holder": holder, "parts": parts})
                case Rebuild():
                    worker_steps.append({"op": "Rebuild", "stage": step.stage, "parts": step.parts,
                                         "sources": [[s.node, s.coefficient, s.copy_of] for s in step.sources],
                                         "denominator": step.denominator, "optimizer": step.optimizer,
                                         "lr_scale": step.lr_scale})
                case _:
                    raise DistributedError(f"unknown plan step {step!r}")
        if not worker_steps:
            return PlanRun(time.perf_counter() - t0, (), 0)
        replies = self._exchange({s: {"cmd": "plan", "steps": worker_steps, "tag_base": 1_000_000}
                                  for s in self._workers})
        if saves:  # the stages wrote their files; the checkpoint is complete once its meta is
            tmp = ckpt / "meta.json.tmp"
            tmp.write_text(json.dumps({"iteration": self.iteration, "sampler_state": self.sampler_state}))
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, ckpt / "meta.json")
        bad = {s: r for s, r in replies.items() if "received" not in r}
        assert not bad, bad
        transfers = tuple(tuple(t) for r in replies.values() for t in r["received"])
        return PlanRun(time.perf_counter() - t0, transfers, sum(r["storage_bytes"] for r in replies.values()))

    # ------------------------------------------------------------------ calibration and tests
    def measure_link(self, a: int, b: int, sizes: tuple[int, ...], repeats: int = 5) -> dict[int, float]:
        """Median round-trip seconds between the processes of stages a and b, per message size (floats)."""
        replies = self._exchange({a: {"cmd": "ping", "peer": b, "sizes": list(sizes), "repeats": repeats,
                                      "initiator": True},
                                  b: {"cmd": "ping", "peer": a, "sizes": list(sizes), "repeats": repeats,
                                      "initiator": False}})
        return {int(k): float(v) for k, v in replies[a]["rtt_s"].items()}

    def measure_host(self, seconds: float = 0.5) -> dict[int, float]:
        """CPU seconds per wall second each process gets when k = 1..S+1 stages compute at once (median)."""
        out = {}
        for k in range(1, self.n_stages + 2):
            replies = self._exchange({s: {"cmd": "burn", "seconds": seconds} for s in range(k)})
            out[k] = sorted(r["cpu_s"] / r["wall_s"] for r in replies.values())[k // 2]
        return out

    def wait_for_spares(self) -> None:
        """Block until every spare has started (torch imported, warmed up)."""
        for handle in self._spares:
            handle.wait_ready(READY_TIMEOUT_S)

    def save_state(self, stage: int, path: Path) -> None:
        """Stage `stage` writes its full packed state to `path` (.npy; tests compare it)."""
        self._exchange({stage: {"cmd": "save_state", "path": str(path)}})


def astuple_op(op) -> tuple[int, int, int]:
    """An Op as the (kind, micro_batch, position) triple the workers receive."""
    return (op.kind, op.micro_batch, op.position)
