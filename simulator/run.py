"""One simulated run: strategy x failure schedule x seed x iterations, driving a real trainer.

Each simulated step runs ONE real ``trainer.train_step()``. The simulator owns the clock:

    for each step (until `iterations` iterations are done, at most `max_steps` steps):
        stages, at = failure_schedule.draw(step, now_s, iteration_s)          # at: 0 = boundary
        if stages:   now_s += at * iteration_s (if acted on) + price(strategy.on_failure(stages, iteration))
        result = trainer.train_step();  now_s += iteration_s;  iteration += 1
        now_s += price(blocking actions of strategy.on_iteration_end(iteration, result))
        now_s += max(0, price(background actions, concurrently) - iteration_s)   # overlapped
        every `eval_every` iterations: val_loss = trainer.evaluate(eval_batches)

``iteration`` counts completed iterations (training progress); a ``Rollback(to_iteration)``
sets it back, so the lost iterations are trained and paid for again. ``iteration_s`` is the
pipeline schedule's simulated iteration time (`simulator.schedule`) with the strategy's
``forward_multiplier``, Bamboo ``redundant_forward_of`` and CheckFree+ swap, or, with
``redundant_overhead``, that factor times the plain pipeline's time for a redundant strategy
(the CheckFree paper's measured 1.65x, issue 15). Action prices come from `simulator.cost` with
the cluster's modelled model's bytes, times ``action_time_scale`` (1 unless a regime compresses
time). Evaluation costs wall time only, not simulated time.

Failures: a failed stage the strategy *acts on* costs a ``Restart(stage)`` (every strategy,
docs/trainer.md); the others are *ignored* (immune stages). Both are counted.

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
from simulator.cost import describe_action, price
from simulator.errors import SimulationError
from simulator.failures import FailureSchedule, NoFailures, make_failure_schedule
from simulator.model_size import ModelSize, trained_model_size
from simulator.schedule import simulate_iteration

__all__ = ["Backend", "RunSpec", "load_backend", "run_one", "time_to_target_s", "young_daly_knobs", "NO_FAILURE"]

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
    micro_batches: int | None = None  # None: the cluster model's, else trainer_config's n_micro_batches (4)
    schedule: str = "1f1b"
    target_loss: float | None = None
    max_steps_factor: float = 4.0  # stop after this x iterations steps (rollback storms)
    backend: str | None = None
    # issue 15 (all optional):
    redundant_overhead: float | None = None  # redundant strategies: iteration = this x the plain pipeline's
    stop_at_target: bool = False  # end the run at the first evaluation at or below target_loss (time to target
    # is unchanged: runs are deterministic; the rows after it are not computed)
    jump_eval_batches: int = 0  # > 0: evaluate just before and after each acted-on failure (loss jump)
    # x the seconds of every strategy action (restarts, transfers, saves, loads): a regime that
    # compresses the run c-fold keeps recovery time relative to the run with 1 / c (docs/fidelity.md)
    action_time_scale: float = 1.0
    # issue 16 (all optional):
    mid_iteration: bool = False  # failures land inside the iteration (simulator.failures.MidIterationFailures)
    failable_embedding: bool = False  # the embedding stage 0 fails like the others

    def key(self) -> tuple[str, float, int]:
        return (self.strategy, float(self.failure_rate), int(self.seed))


def time_to_target_s(rows: Sequence[dict[str, Any]], target: float | None) -> float:
    """Simulated seconds of the first evaluation at or below ``target``; inf if never."""
    row = _first_at_target(rows, target)
    return math.inf if row is None else float(row["sim_time_s"])


def _first_at_target(rows: Sequence[dict[str, Any]], target: float | None) -> dict[str, Any] | None:
    if target is None:
        return None
    for r in rows:
        if r["val_loss"] is not None and r["val_loss"] <= target:
            return r
    return None


def _check_spec(spec: RunSpec) -> None:
    if spec.iterations < 1:
        raise SimulationError(f"iterations must be >= 1, got {spec.iterations}")
    if spec.eval_every < 1:
        raise SimulationError(f"eval_every must be >= 1, got {spec.eval_every}")
    if spec.redundant_overhead is not None and not (math.isfinite(spec.redundant_overhead)
                                                    and spec.redundant_overhead >= 1.0):
        raise SimulationError(f"redundant_overhead must be a finite factor >= 1, got {spec.redundant_overhead!r}")
    if not (math.isfinite(spec.action_time_scale) and spec.action_time_scale > 0):
        raise SimulationError(f"action_time_scale must be a finite factor > 0, got {spec.action_time_scale!r}")
    if spec.stop_at_target and spec.target_loss is None:
        raise SimulationError("stop_at_target needs a target_loss")


def young_daly_knobs(knobs: dict[str, Any], *, save_s: float, schedule: FailureSchedule,
                     iteration_s: float) -> dict[str, Any]:
    """Fill ``save_s``, ``mtbf_s``, ``iteration_s`` of knobs asking for ``interval="auto"``.

    ``save_s`` is the price of one whole-model save on the cluster (the modelled model's
    parameters and Adam state), ``iteration_s`` the simulated iteration, and ``mtbf_s`` the mean
    time between failures of the pipeline from the failure schedule: ``iteration_s / q`` with
    ``q`` the probability that at least one failable stage fails in an iteration
    (`FailureSchedule.pipeline_failure_probability`). Young 1974: interval = sqrt(2 C MTBF).
    Knobs without ``interval="auto"`` are returned unchanged.
    """
    if knobs.get("interval") != "auto":
        return knobs
    q = schedule.pipeline_failure_probability(iteration_s)
    if q is None:
        raise SimulationError(f"checkpoint interval='auto' needs a rate-based failure model (bernoulli, hourly), "
                              f"got {type(schedule).__name__}")
    mtbf_s = iteration_s / q if q > 0 else math.inf
    filled = {"save_s": save_s, "mtbf_s": mtbf_s if math.isfinite(mtbf_s) else 1e300, "iteration_s": iteration_s}
    return {**filled, **{k: v for k, v in knobs.items() if v is not None}}


class _Clock:
    """Iteration seconds of the strategy's current schedule, cached per (multipliers, swap, redundant)."""

    def __init__(self, spec: RunSpec, cluster: Cluster, strategy: Any, micro_batches: int):
        self.spec, self.cluster, self.strategy, self.m = spec, cluster, strategy, micro_batches
        self.cache: dict[tuple, float] = {}
        self.model_s: dict[tuple, float] = {}

    def __call__(self) -> float:
        n = self.cluster.n_stages
        mult = tuple(float(self.strategy.forward_multiplier(s)) for s in range(n))
        swap = bool(self.strategy.swap_on_odd_microbatches())
        hook = getattr(self.strategy, "redundant_forward_of", None)  # optional hook (issue 15)
        succ = tuple(hook(s) for s in range(n)) if hook is not None else (None,) * n
        key = (mult, swap, succ)
        if key not in self.cache:
            timing = simulate_iteration(self.cluster, self.m, schedule=self.spec.schedule,
                                        forward_multiplier=lambda s: mult[s], swap_odd=swap,
                                        redundant_of=lambda s: succ[s])
            self.model_s[key] = timing.iteration_s
            seconds = timing.iteration_s
            redundant = any(x is not None for x in succ) or any(x != 1.0 for x in mult)
            if redundant and self.spec.redundant_overhead is not None:
                plain = simulate_iteration(self.cluster, self.m, schedule=self.spec.schedule, swap_odd=swap)
                seconds = self.spec.redundant_overhead * plain.iteration_s
            self.cache[key] = seconds
        return self.cache[key]


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Run ``spec``; return a JSON-able result (key, rows, time to target, counts, timings).

    Raises `SimulationError` for a bad spec (iterations or eval_every < 1, a cluster whose stage
    count differs from the trainer's, redundant_overhead < 1, a strategy rolling back outside
    0..iteration).
    """
    wall0 = time.perf_counter()
    _check_spec(spec)
    backend = load_backend(spec.backend)
    cfg = dict(spec.trainer_config)
    cfg.setdefault("seed", spec.seed)
    trainer = backend.make_trainer(cfg)
    cluster = spec.cluster
    if cluster.n_stages != trainer.n_stages + 1:
        raise SimulationError(f"cluster {cluster.name!r} has {cluster.n_stages} stages, the trainer "
                              f"{trainer.n_stages + 1} (0..{trainer.n_stages})")
    # the schedule priced: the modelled model's iteration when the cluster names one (issue 15)
    micro_batches = spec.micro_batches or (cluster.model.micro_batches if cluster.model else 0) \
        or int(cfg.get("n_micro_batches", 4))
    if spec.strategy == NO_FAILURE:
        schedule: FailureSchedule = NoFailures(cluster.n_stages)
    else:
        schedule = make_failure_schedule(spec.failure_model, spec.failure_rate, spec.seed, cluster.n_stages,
                                         trace=spec.trace, time_scale=spec.trace_time_scale,
                                         failable=range(cluster.n_stages) if spec.failable_embedding else None,
                                         mid_iteration=spec.mid_iteration)
    trained = trained_model_size(trainer)
    knobs = dict(spec.strategy_knobs.get(spec.strategy, {}))
    if knobs.get("interval") == "auto":
        save_bytes = (cluster.model or trained).checkpoint_bytes()
        plain_s = simulate_iteration(cluster, micro_batches, schedule=spec.schedule).iteration_s
        knobs = young_daly_knobs(knobs, save_s=cluster.storage_s(save_bytes) * spec.action_time_scale,
                                 schedule=schedule, iteration_s=plain_s)
    strategy = backend.make_strategy(spec.strategy, **knobs)
    strategy.attach(trainer)
    loop = _Loop(spec, cluster, trainer, strategy, schedule, trained, _Clock(spec, cluster, strategy, micro_batches))
    loop.run()
    wall_s = time.perf_counter() - wall0
    describe = strategy.describe() if hasattr(strategy, "describe") else {"name": spec.strategy}
    at_target = _first_at_target(loop.rows, spec.target_loss)
    model = cluster.model
    tokens = model.tokens_per_iteration if model is not None and model.tokens_per_iteration else loop.tokens
    return {
        "key": {"strategy": spec.strategy, "failure_rate": float(spec.failure_rate), "seed": int(spec.seed)},
        "spec": {k: v for k, v in asdict(spec).items() if k != "cluster"} | {"cluster": cluster.name},
        "strategy": _jsonable(describe),
        "failure_schedule": schedule.describe(),
        "iteration_s": loop.clock.cache and min(loop.clock.cache.values()),
        "iteration_s_model": loop.clock.model_s and min(loop.clock.model_s.values()),
        "steps": loop.step,
        "iterations_done": loop.iteration,
        "failures": loop.acted + loop.ignored,
        "failures_acted_on": loop.acted,
        "failures_ignored": loop.ignored,
        "actions_scaled": loop.scaled,
        "storage_bytes": int(strategy.storage_bytes()) if hasattr(strategy, "storage_bytes") else 0,
        "sim_time_s": loop.now_s,
        "time_to_target_s": None if at_target is None else float(at_target["sim_time_s"]),
        "iterations_to_target": None if at_target is None else int(at_target["iteration"]),
        "steps_to_target": None if at_target is None else int(at_target["step"]),
        "target_loss": spec.target_loss,
        "tokens_per_iteration": int(tokens),
        "model": None if model is None else model.name,
        "wall_s": wall_s,
        "simulator_s": loop.sim_overhead_s,
        "rows": _jsonable(loop.rows),
    }


class _Loop:
    """The step loop of `run_one` (module docstring); state lives here, results in `rows`."""

    def __init__(self, spec: RunSpec, cluster: Cluster, trainer: Any, strategy: Any, schedule: FailureSchedule,
                 trained: ModelSize, clock: _Clock):
        self.spec, self.cluster, self.trainer, self.strategy = spec, cluster, trainer, strategy
        self.schedule, self.trained, self.clock = schedule, trained, clock
        self.now_s, self.iteration, self.step = 0.0, 0, 0
        self.acted = self.ignored = self.scaled = 0
        self.tokens = 0
        self.sim_overhead_s = 0.0
        self.rows: list[dict[str, Any]] = []

    def _price(self, actions: Sequence[Any], concurrent: bool = False) -> float:
        p = price(self.cluster, actions, trained=self.trained, concurrent=concurrent)
        self.scaled += p.scaled
        return p.seconds * self.spec.action_time_scale

    def run(self) -> None:
        spec, trainer = self.spec, self.trainer
        val0 = float(trainer.evaluate(spec.eval_batches))
        self.rows.append({"sim_time_s": 0.0, "iteration": 0, "step": 0, "train_loss": None, "val_loss": val0,
                          "failures": [], "strategy_events": []})
        if spec.stop_at_target and val0 <= spec.target_loss:
            return
        max_steps = max(spec.iterations, int(math.ceil(spec.max_steps_factor * spec.iterations)))
        while self.iteration < spec.iterations and self.step < max_steps:
            if self._one_step():
                return

    def _one_step(self) -> bool:
        """One simulated step; True when the run stops at its target."""
        spec, trainer, strategy = self.spec, self.trainer, self.strategy
        t0 = time.perf_counter()
        it_s = self.clock()
        draw = self.schedule.draw(self.step, self.now_s, it_s)
        failed = draw.stages
        self.sim_overhead_s += time.perf_counter() - t0
        events: list[dict[str, Any]] = []
        row: dict[str, Any] = {}
        if failed:
            before = float(trainer.evaluate(spec.jump_eval_batches)) if spec.jump_eval_batches else None
            actions = strategy.on_failure(list(failed), self.iteration)
            t0 = time.perf_counter()
            restarted = {a.stage for a in actions if type(a).__name__ == "Restart"}
            acted = [s for s in failed if s in restarted]
            self.acted += len(acted)
            self.ignored += len(failed) - len(acted)
            if actions and draw.at_fraction > 0.0:  # lost inside the iteration: its work so far too (issue 16)
                lost_s = draw.at_fraction * it_s
                self.now_s += lost_s
                events.append({"action": "LostWork", "at_fraction": draw.at_fraction, "phase": "failure",
                               "cost_s": lost_s})
            cost_s = self._price(actions)
            self.now_s += cost_s
            for a in actions:
                events.append({**describe_action(a), "phase": "failure"})
                if type(a).__name__ == "Rollback":
                    if not 0 <= a.to_iteration <= self.iteration:
                        raise SimulationError(f"strategy {spec.strategy!r} rolled back to iteration "
                                              f"{a.to_iteration}, outside 0..{self.iteration}")
                    self.iteration = int(a.to_iteration)
            if actions:
                events[-1]["cost_s"] = cost_s
            self.sim_overhead_s += time.perf_counter() - t0
            if before is not None and acted:
                row["val_jump"] = [before, float(trainer.evaluate(spec.jump_eval_batches))]
            row["failures_ignored"] = [s for s in failed if s not in restarted]
            it_s = self.clock()  # a repair may change the schedule (e.g. a replica lost)
        result = trainer.train_step()
        self.tokens = int(getattr(result, "tokens", 0))
        t0 = time.perf_counter()
        self.now_s += it_s
        self.iteration += 1
        self.step += 1
        actions = strategy.on_iteration_end(self.iteration, result)
        if actions:
            blocking = [a for a in actions if not getattr(a, "background", False)]
            background = [a for a in actions if getattr(a, "background", False)]
            if blocking:
                cost_s = self._price(blocking)
                self.now_s += cost_s
                events += [{**describe_action(a), "phase": "iteration_end"} for a in blocking]
                events[-1]["cost_s"] = cost_s
            if background:  # overlapped with the next iteration: only what is longer than it costs
                extra_s = max(0.0, self._price(background, concurrent=True) - it_s)
                self.now_s += extra_s
                events += [{**describe_action(a), "phase": "background"} for a in background]
                events[-1]["cost_s"] = extra_s
        self.sim_overhead_s += time.perf_counter() - t0
        val = None
        if self.iteration % spec.eval_every == 0 or self.iteration == spec.iterations:
            val = float(trainer.evaluate(spec.eval_batches))
        self.rows.append({"sim_time_s": self.now_s, "iteration": self.iteration, "step": self.step,
                          "train_loss": float(result.loss), "val_loss": val, "failures": list(failed),
                          "strategy_events": events, **row})
        return bool(spec.stop_at_target and val is not None and val <= spec.target_loss)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return repr(x)
