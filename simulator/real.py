"""A real run: the simulator's failure schedules and strategies on one OS process per pipeline stage.

Same loop as `simulator.run.run_one`, with the wall clock in place of simpy's and SIGKILL in place
of a function call (trainer.distributed, docs/real-runs.md):

    for each step, until `iterations` iterations are done (at most max_steps_factor x iterations):
        draw = schedule.draw(step, now_s, iteration_s)       # now_s: training seconds so far
        lost = draw.stages not immune to the strategy         # immune ones are not killed (logged)
        at the boundary: SIGKILL lost; replace them (warm spares); run plan_recovery
        result = train_step()     # a mid-iteration draw kills `lost` at_fraction x iteration_s in;
                                  # the iteration aborts everywhere, is recovered and run again
        run plan_iteration_end    # copies, checkpoints, LR changes
        every eval_every iterations: validation loss (the training clock stops meanwhile)

`now_s` counts training only (failures, recoveries, iterations, copies), not evaluations, as the
simulator does. Every committed iteration is one row, appended to the log file as it happens (one
write, flush, fsync); an aborted iteration is not a row of its own: its lost seconds and the
recovery that followed are events of the row of the iteration that then committed. The strategies
run as planners (`trainer.strategies.make_planned_strategy`): the same decisions as the classes the
simulator uses, carried out with real transfers.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simulator.calibrate import fit_host_load, host_cores, host_load_from_ops, message_delay_from_ops, stage_times
from simulator.cluster import Cluster
from simulator.errors import SimulationError
from simulator.failures import NoFailures, make_failure_schedule
from simulator.run import NO_FAILURE, RunSpec

__all__ = ["RealRunSpec", "run_real", "real_time_to_target_s"]

MAX_ATTEMPTS = 5  # an iteration that aborts this often in a row is a crash loop, not a failure pattern


@dataclass(frozen=True, kw_only=True)
class RealRunSpec:
    """Everything one real run needs (the fields of `simulator.run.RunSpec` that apply, plus processes)."""

    strategy: str
    failure_rate: float
    seed: int
    iterations: int
    trainer_config: dict[str, Any] = field(default_factory=dict)  # TrainerConfig kwargs
    strategy_knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    failure_model: str = "bernoulli"
    trace: str | None = None
    trace_time_scale: float = 1.0
    eval_every: int = 10
    eval_batches: int = 4
    schedule: str = "gpipe"
    target_loss: float | None = None
    max_steps_factor: float = 4.0
    mid_iteration: bool = False
    failable_embedding: bool = False
    spares: int = 2  # warm standby processes (docs/real-runs.md)
    timeout_s: float = 120.0  # bound of every wait on a stage process
    cache_dir: str | None = None

    def key(self) -> tuple[str, float, int]:
        return (self.strategy, float(self.failure_rate), int(self.seed))

    def simulated(self, cluster: Cluster) -> RunSpec:
        """The simulated run of the same configuration on `cluster` (same draws, same trainer)."""
        return RunSpec(strategy=self.strategy, failure_rate=self.failure_rate, seed=self.seed,
                       iterations=self.iterations, cluster=cluster, trainer_config=dict(self.trainer_config),
                       strategy_knobs=dict(self.strategy_knobs), failure_model=self.failure_model, trace=self.trace,
                       trace_time_scale=self.trace_time_scale, eval_every=self.eval_every,
                       eval_batches=self.eval_batches, schedule=self.schedule, target_loss=self.target_loss,
                       max_steps_factor=self.max_steps_factor, mid_iteration=self.mid_iteration,
                       failable_embedding=self.failable_embedding)


def real_time_to_target_s(rows: list[dict[str, Any]], target: float | None) -> float:
    """Training seconds of the first evaluation at or below `target`; inf if never."""
    if target is None:
        return math.inf
    for r in rows:
        if r["val_loss"] is not None and r["val_loss"] <= target:
            return float(r["time_s"])
    return math.inf


class _Clock:
    """Wall seconds of training: stops during evaluations."""

    def __init__(self) -> None:
        self._t0, self._paused = time.perf_counter(), 0.0

    def now(self) -> float:
        return time.perf_counter() - self._t0 - self._paused

    def pause(self, seconds: float) -> None:
        self._paused += seconds


def _events(actions, phase: str) -> list[dict[str, Any]]:
    from simulator.cost import describe_action

    return [{**describe_action(a), "phase": phase} for a in actions]


def run_real(spec: RealRunSpec, workdir: Path, *, log_path: Path | None = None,
             on_row: Callable[[dict[str, Any]], None] | None = None, pipeline: Any = None) -> dict[str, Any]:
    """Run `spec` with real processes under `workdir`; return a record like `run_one`'s (times in wall s).

    `pipeline`: an already started `DistributedPipeline` of the same configuration to reuse (it is
    `reset` first and left running); by default the run starts and stops its own.
    """
    from trainer.api import TrainerConfig
    from trainer.distributed import DistributedPipeline
    from trainer.strategies import make_planned_strategy
    from trainer.strategies.plan import plan_actions

    if spec.iterations < 1 or spec.eval_every < 1:
        raise SimulationError(f"iterations and eval_every must be >= 1, got {spec.iterations}, {spec.eval_every}")
    wall0 = time.perf_counter()
    cfg = TrainerConfig(**{"seed": spec.seed, **spec.trainer_config})
    strategy = make_planned_strategy(spec.strategy, **spec.strategy_knobs.get(spec.strategy, {}))
    n_ids = cfg.n_stages + 1
    if spec.strategy == NO_FAILURE:
        schedule = NoFailures(n_ids)
    else:
        schedule = make_failure_schedule(spec.failure_model, spec.failure_rate, spec.seed, n_ids, trace=spec.trace,
                                         time_scale=spec.trace_time_scale,
                                         failable=range(n_ids) if spec.failable_embedding else None,
                                         mid_iteration=spec.mid_iteration)
    measured: dict[str, list] = {"restart_s": [], "recovery_s": [], "iteration_end_s": [], "lost_work_s": [],
                                 "transfers": [], "iteration_s": [], "pipeline_s": [], "commit_s": []}
    rows: list[dict[str, Any]] = []
    if pipeline is None:
        pipe = DistributedPipeline(cfg, workdir, cache_dir=None if spec.cache_dir is None else Path(spec.cache_dir),
                                   schedule=spec.schedule, spares=spec.spares, timeout_s=spec.timeout_s)
        context = pipe
    else:
        if pipeline.config != cfg or pipeline.schedule != spec.schedule:
            raise SimulationError("run_real: the given pipeline was built for another configuration")
        pipe, context = pipeline, contextlib.nullcontext()
        pipe.reset()
    with context:
        startup_s = time.perf_counter() - wall0
        host_before = pipe.measure_host(0.3)
        strategy.bind(pipe)
        pipe.run_plan(strategy.plan_attach())  # before the clock: the initial model is reproducible from the seed
        # Bamboo's redundant forward runs for real whichever way the simulator prices it (issue 15:
        # `redundant_forward_of` for the event model, a forward multiplier for "double")
        swap = strategy.swap_on_odd_microbatches()
        redundant = strategy.forward_multiplier(1) > 1.0 or strategy.redundant_forward_of(1) is not None

        all_ops: list[dict[int, list]] = []

        def emit(row: dict[str, Any]) -> None:
            t_log = time.perf_counter()
            rows.append(row)
            if log_path is not None:
                from simulator.sweep import append_result

                append_result(log_path, row)
            if on_row is not None:
                on_row(row)
            if clock is not None:
                clock.pause(time.perf_counter() - t_log)  # the log (fsync) is the harness's, not training

        clock = None

        def recover(lost: tuple[int, ...], iteration: int, events: list[dict[str, Any]]) -> None:
            restarted = pipe.replace(lost)
            strategy.note_lost(lost)
            steps = strategy.plan_recovery(lost, iteration)
            run = pipe.run_plan(steps)
            measured["restart_s"].append(restarted.seconds)
            measured["recovery_s"].append(run.seconds)
            measured["transfers"] += [list(t) for t in run.transfers]
            events += _events(plan_actions(steps, pipe), "failure")
            events.append({"action": "Measured", "phase": "failure", "restart_s": restarted.seconds,
                           "from_spare": list(restarted.from_spare), "recovery_s": run.seconds})

        clock = _Clock()
        t_eval = time.perf_counter()
        emit({"time_s": 0.0, "iteration": 0, "step": 0, "train_loss": None,
              "val_loss": pipe.evaluate(spec.eval_batches), "failures": [], "ignored": [], "events": []})
        clock.pause(time.perf_counter() - t_eval)
        max_steps = max(spec.iterations, int(math.ceil(spec.max_steps_factor * spec.iterations)))
        step = n_failures = n_ignored = 0
        while pipe.iteration < spec.iterations and step < max_steps:
            it_est = statistics.median(measured["iteration_s"][-20:]) if measured["iteration_s"] else 0.05
            draw = schedule.draw(step, clock.now(), it_est)
            immune = strategy.immune_stages()
            lost = tuple(s for s in draw.stages if s not in immune)
            ignored = [s for s in draw.stages if s in immune]
            n_failures, n_ignored = n_failures + len(lost), n_ignored + len(ignored)
            events: list[dict[str, Any]] = []
            kill_after = None
            if lost and draw.at_fraction > 0.0:
                kill_after = draw.at_fraction * it_est
            elif lost:
                pipe.kill(lost)
                recover(lost, pipe.iteration, events)
            for attempt in range(MAX_ATTEMPTS):
                outcome = pipe.train_step(swap_odd=swap, redundant=redundant, kill_after_s=kill_after,
                                          kill_stages=lost if kill_after is not None else ())
                if outcome.committed:
                    break
                measured["lost_work_s"].append(outcome.seconds)
                events.append({"action": "LostWork", "phase": "failure", "lost": list(outcome.lost),
                               "seconds": outcome.seconds, "at_fraction": draw.at_fraction})
                recover(outcome.lost, pipe.iteration, events)
                kill_after = None
            else:
                raise SimulationError(f"iteration {pipe.iteration} aborted {MAX_ATTEMPTS} times in a row")
            measured["iteration_s"].append(outcome.seconds)
            measured["pipeline_s"].append(outcome.pipeline_s)
            measured["commit_s"].append(outcome.commit_s)
            step += 1
            steps = strategy.plan_iteration_end(pipe.iteration, outcome.result)
            if steps:
                run = pipe.run_plan(steps)
                measured["iteration_end_s"].append(run.seconds)
                events += _events(plan_actions(steps, pipe), "iteration_end")
                events.append({"action": "Measured", "phase": "iteration_end", "seconds": run.seconds})
            now_s = clock.now()
            val = None
            if pipe.iteration % spec.eval_every == 0 or pipe.iteration == spec.iterations:
                t_eval = time.perf_counter()
                val = pipe.evaluate(spec.eval_batches)
                clock.pause(time.perf_counter() - t_eval)
            all_ops.append({int(k): v for k, v in outcome.ops.items()})
            emit({"time_s": now_s, "iteration": pipe.iteration, "step": step, "train_loss": outcome.result.loss,
                  "val_loss": val, "failures": list(lost), "ignored": ignored,
                  "mid_iteration": bool(lost) and draw.at_fraction > 0.0, "iteration_s": outcome.seconds,
                  "events": events})
        training_s = clock.now()
        host_after = pipe.measure_host(0.3)
    ttt = real_time_to_target_s(rows, spec.target_loss)
    return {
        "mode": "real",
        "key": {"strategy": spec.strategy, "failure_rate": float(spec.failure_rate), "seed": int(spec.seed)},
        "spec": asdict(spec),
        "strategy": strategy.describe(),
        "failure_schedule": schedule.describe(),
        "iteration_s": statistics.median(measured["iteration_s"]) if measured["iteration_s"] else None,
        "iteration_mean_s": statistics.fmean(measured["iteration_s"]) if measured["iteration_s"] else None,
        "steps": step,
        "iterations_done": rows[-1]["iteration"],
        "failures": n_failures,
        "ignored_failures": n_ignored,
        "training_s": training_s,
        "startup_s": startup_s,
        "wall_s": time.perf_counter() - wall0,
        "time_to_target_s": ttt if math.isfinite(ttt) else None,
        "target_loss": spec.target_loss,
        "measured": measured,
        "host": {"cores": host_cores(), "share_before": host_before, "share_after": host_after,
                 "load_probes": fit_host_load({k: (host_before[k] + host_after[k]) / 2 for k in host_before},
                                              host_cores()),
                 "load": host_load_from_ops(all_ops, host_cores()),
                 "message_delay_s": message_delay_from_ops(all_ops)},
        "stage_times_s": list(map(list, stage_times(all_ops, cfg.n_stages))) if all_ops else None,
        "ops": all_ops,  # per committed iteration, stage -> operations (trainer/distributed/worker.py)
        "rows": rows,
    }
