"""One simulated run: strategy x failure schedule x seed x iterations, driving a real trainer.

Each simulated step runs ONE real ``trainer.train_step()``. The simulator owns the clock:

    for each step (until `iterations` iterations are done, at most `max_steps` steps):
        stages, at = failure_schedule.draw(step, now_s, iteration_s)          # at: 0 = boundary
        if stages:   now_s += at * iteration_s (if acted on) + price(strategy.on_failure(stages, iteration))
        result = trainer.train_step();  now_s += iteration_s;  iteration += 1
        now_s += price(strategy.on_iteration_end(iteration, result))           # e.g. checkpoints
        every `eval_every` iterations: val_loss = trainer.evaluate(eval_batches)

``iteration`` counts completed iterations (training progress); a ``Rollback(to_iteration)``
sets it back, so the lost iterations are trained and paid for again. ``iteration_s`` is the
pipeline schedule's simulated iteration time (`simulator.schedule`) with the strategy's
``forward_multiplier`` and CheckFree+ swap; action prices come from `simulator.cost`.
Evaluation costs wall time only, not simulated time.

The trainer and strategies come from a *backend* (default: the `trainer` package); tests
plug in a fake with ``backend="module:attribute"``.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from simulator.cluster import Cluster
from simulator.cost import describe_action, price_actions
from simulator.errors import SimulationError
from simulator.failures import NoFailures, make_failure_schedule
from simulator.schedule import simulate_iteration

__all__ = ["Backend", "RunSpec", "load_backend", "run_one", "time_to_target_s", "NO_FAILURE"]

NO_FAILURE = "no_failure"  # the failure-free baseline: never fails whatever the rate


@dataclass(frozen=True)
class Backend:
    """Where trainers and strategies come from."""

    make_trainer: Callable[[dict[str, Any]], Any]  # TrainerConfig kwargs -> PipelineTrainer
    make_strategy: Callable[..., Any]  # (name, **knobs) -> RecoveryStrategy (raises on unknown)
    strategy_names: Callable[[], Sequence[str]]


def _trainer_backend() -> Backend:
    def make_trainer(cfg: dict[str, Any]):
        from trainer import PipelineTrainer
        from trainer.api import TrainerConfig

        return PipelineTrainer(TrainerConfig(**cfg))

    def make_strategy(name: str, **knobs):
        from trainer.strategies import make_strategy as mk

        return mk(name, **knobs)

    def names() -> Sequence[str]:
        from trainer.strategies import STRATEGIES

        return tuple(STRATEGIES)

    return Backend(make_trainer, make_strategy, names)


def load_backend(spec: str | None) -> Backend:
    """The default `trainer` backend, or ``"module:attribute"`` naming a `Backend`."""
    if spec is None:
        return _trainer_backend()
    module, _, attr = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr or "BACKEND")
    except (ImportError, AttributeError) as exc:
        raise SimulationError(f"cannot load backend {spec!r}: {exc}") from None
    if not isinstance(obj, Backend):
        raise SimulationError(f"backend {spec!r} is a {type(obj).__name__}, not a simulator.run.Backend")
    return obj


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Everything one run needs; picklable and JSON-able (``asdict``) apart from the cluster."""

    strategy: str
    failure_rate: float  # per-stage per-iteration probability ('bernoulli') or per stage-hour ('hourly')
    seed: int
    iterations: int  # completed iterations to reach
    cluster: Cluster
    trainer_config: dict[str, Any] = field(default_factory=dict)  # TrainerConfig kwargs
    strategy_knobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> Config knobs
    failure_model: str = "bernoulli"
    trace: str | None = None
    trace_time_scale: float = 1.0
    eval_every: int = 10
    eval_batches: int = 4
    micro_batches: int | None = None  # None: trainer_config's n_micro_batches (default 4)
    schedule: str = "1f1b"
    target_loss: float | None = None
    max_steps_factor: float = 4.0  # stop after this x iterations steps (rollback storms)
    backend: str | None = None
    mid_iteration: bool = False  # failures land inside the iteration (simulator.failures.MidIterationFailures)
    stop_at_target: bool = False  # end the run at the first evaluation at or below target_loss (time to target
    # is unchanged: runs are deterministic; the rows after it are not computed)
    failable_embedding: bool = False  # the embedding stage 0 fails like the others (issue 16)

    def key(self) -> tuple[str, float, int]:
        return (self.strategy, float(self.failure_rate), int(self.seed))


def time_to_target_s(rows: Sequence[dict[str, Any]], target: float | None) -> float:
    """Simulated seconds of the first evaluation at or below ``target``; inf if never."""
    if target is None:
        return math.inf
    for r in rows:
        if r["val_loss"] is not None and r["val_loss"] <= target:
            return float(r["sim_time_s"])
    return math.inf


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Run ``spec``; return a JSON-able result (key, rows, time to target, timings)."""
    wall0 = time.perf_counter()
    if spec.iterations < 1:
        raise SimulationError(f"iterations must be >= 1, got {spec.iterations}")
    if spec.eval_every < 1:
        raise SimulationError(f"eval_every must be >= 1, got {spec.eval_every}")
    backend = load_backend(spec.backend)
    cfg = dict(spec.trainer_config)
    cfg.setdefault("seed", spec.seed)
    trainer = backend.make_trainer(cfg)
    strategy = backend.make_strategy(spec.strategy, **spec.strategy_knobs.get(spec.strategy, {}))
    strategy.attach(trainer)
    cluster = spec.cluster
    if cluster.n_stages != trainer.n_stages + 1:
        raise SimulationError(f"cluster {cluster.name!r} has {cluster.n_stages} stages, the trainer "
                              f"{trainer.n_stages + 1} (0..{trainer.n_stages})")
    micro_batches = spec.micro_batches or int(cfg.get("n_micro_batches", 4))
    sim_overhead_s = 0.0
    t0 = time.perf_counter()
    if spec.strategy == NO_FAILURE:
        schedule = NoFailures(cluster.n_stages)
    else:
        schedule = make_failure_schedule(spec.failure_model, spec.failure_rate, spec.seed, cluster.n_stages,
                                         trace=spec.trace, time_scale=spec.trace_time_scale,
                                         failable=range(cluster.n_stages) if spec.failable_embedding else None,
                                         mid_iteration=spec.mid_iteration)
    iteration_cache: dict[tuple, float] = {}

    def iteration_s() -> float:
        mult = tuple(float(strategy.forward_multiplier(s)) for s in range(cluster.n_stages))
        swap = bool(strategy.swap_on_odd_microbatches())
        key = (mult, swap)
        if key not in iteration_cache:
            iteration_cache[key] = simulate_iteration(cluster, micro_batches, schedule=spec.schedule,
                                                      forward_multiplier=lambda s: mult[s], swap_odd=swap).iteration_s
        return iteration_cache[key]

    now_s, iteration, step = 0.0, 0, 0
    rows: list[dict[str, Any]] = []
    sim_overhead_s += time.perf_counter() - t0
    val0 = float(trainer.evaluate(spec.eval_batches))
    rows.append({"sim_time_s": 0.0, "iteration": 0, "step": 0, "train_loss": None, "val_loss": val0,
                 "failures": [], "strategy_events": []})
    max_steps = max(spec.iterations, int(math.ceil(spec.max_steps_factor * spec.iterations)))
    n_failures = 0
    while iteration < spec.iterations and step < max_steps:
        t0 = time.perf_counter()
        it_s = iteration_s()
        draw = schedule.draw(step, now_s, it_s)
        failed = draw.stages
        sim_overhead_s += time.perf_counter() - t0
        events: list[dict[str, Any]] = []
        if failed:
            n_failures += len(failed)
            actions = strategy.on_failure(list(failed), iteration)
            t0 = time.perf_counter()
            if actions and draw.at_fraction > 0.0:  # a node was lost inside the iteration: its work so far too
                now_s += draw.at_fraction * it_s
                events.append({"action": "LostWork", "at_fraction": draw.at_fraction, "phase": "failure",
                               "cost_s": draw.at_fraction * it_s})
            cost_s = price_actions(cluster, actions)
            now_s += cost_s
            for a in actions:
                events.append({**describe_action(a), "phase": "failure"})
                if type(a).__name__ == "Rollback":
                    if not 0 <= a.to_iteration <= iteration:
                        raise SimulationError(f"strategy {spec.strategy!r} rolled back to iteration "
                                              f"{a.to_iteration}, outside 0..{iteration}")
                    iteration = int(a.to_iteration)
            if actions:
                events[-1]["cost_s"] = cost_s
            sim_overhead_s += time.perf_counter() - t0
            it_s = iteration_s()  # a repair may change the schedule (e.g. a replica lost)
        result = trainer.train_step()
        t0 = time.perf_counter()
        now_s += it_s
        iteration += 1
        step += 1
        sim_overhead_s += time.perf_counter() - t0
        actions = strategy.on_iteration_end(iteration, result)
        t0 = time.perf_counter()
        if actions:
            cost_s = price_actions(cluster, actions)
            now_s += cost_s
            events += [{**describe_action(a), "phase": "iteration_end"} for a in actions]
            events[-1]["cost_s"] = cost_s
        sim_overhead_s += time.perf_counter() - t0
        val = None
        if iteration % spec.eval_every == 0 or iteration == spec.iterations:
            val = float(trainer.evaluate(spec.eval_batches))
        rows.append({"sim_time_s": now_s, "iteration": iteration, "step": step, "train_loss": float(result.loss),
                     "val_loss": val, "failures": list(failed), "strategy_events": events})
        if spec.stop_at_target and val is not None and spec.target_loss is not None and val <= spec.target_loss:
            break
    wall_s = time.perf_counter() - wall0
    describe = strategy.describe() if hasattr(strategy, "describe") else {"name": spec.strategy}
    return {
        "key": {"strategy": spec.strategy, "failure_rate": float(spec.failure_rate), "seed": int(spec.seed)},
        "spec": {k: v for k, v in asdict(spec).items() if k != "cluster"} | {"cluster": cluster.name},
        "strategy": _jsonable(describe),
        "failure_schedule": schedule.describe(),
        "iteration_s": iteration_cache and min(iteration_cache.values()),
        "steps": step,
        "iterations_done": iteration,
        "failures": n_failures,
        "storage_bytes": int(strategy.storage_bytes()) if hasattr(strategy, "storage_bytes") else 0,
        "sim_time_s": now_s,
        "time_to_target_s": _finite_or_none(time_to_target_s(rows, spec.target_loss)),
        "target_loss": spec.target_loss,
        "wall_s": wall_s,
        "simulator_s": sim_overhead_s,
        "rows": _jsonable(rows),
    }


def _finite_or_none(x: float) -> float | None:
    """JSON has no infinity: 'not reached' is stored as null."""
    return x if math.isfinite(x) else None


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)
