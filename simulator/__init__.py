"""simulator: a simpy discrete-event harness that drives the real pipeline trainer.

simpy owns the clock: a cluster model (`cluster`, `presets`), pipeline schedules simulated
message by message (`schedule`), failure schedules (`failures`), action pricing (`cost`),
single runs (`run`), the modelled model's bytes (`model_size`), resumable sweeps (`sweep`,
`experiments`), statistics, reports and plots (`stats`, `report`, `plots`), the
``shardproof simulate`` command line (`cli`), and the real multi-process run: its loop (`real`),
a shared host (`host`), calibration of `local-real` (`calibrate`) and its command line
(`real_cli`). docs/simulator.md and docs/real-runs.md are the reference.
"""

from simulator.calibrate import calibrate
from simulator.cluster import Cluster, LinkSpec, ring_allreduce_s
from simulator.cost import Price, action_seconds, price, price_actions
from simulator.errors import SimulationError
from simulator.failures import (
    BambooTraceFailures,
    BernoulliFailures,
    FailureDraw,
    FailureSchedule,
    HourlyFailures,
    MidIterationFailures,
    NoFailures,
    TraceFailures,
    bamboo_trace_stats,
    make_failure_schedule,
)
from simulator.host import SharedHost
from simulator.model_size import ModelSize, action_bytes, trained_model_size
from simulator.presets import (
    local_cluster,
    paper_500m_model,
    paper_geo_cluster,
    paper_geo_iteration_times,
    paper_geo_report,
)
from simulator.real import RealRunSpec, run_real
from simulator.run import Backend, RunSpec, run_one
from simulator.schedule import IterationTiming, simulate_iteration
from simulator.stats import Interval, Summary, bootstrap_mean, paired_ratios, retarget, summarize
from simulator.sweep import SweepSpec, run_sweep

__all__ = [
    # calibrate.py
    "calibrate",
    # cluster.py
    "Cluster", "LinkSpec", "ring_allreduce_s",
    # cost.py
    "Price", "action_seconds", "price", "price_actions",
    # errors.py
    "SimulationError",
    # failures.py
    "FailureSchedule", "NoFailures", "BernoulliFailures", "HourlyFailures", "TraceFailures",
    "BambooTraceFailures", "bamboo_trace_stats", "make_failure_schedule", "FailureDraw", "MidIterationFailures",
    # host.py
    "SharedHost",
    # model_size.py
    "ModelSize", "action_bytes", "trained_model_size",
    # presets.py
    "local_cluster", "paper_500m_model", "paper_geo_cluster", "paper_geo_iteration_times", "paper_geo_report",
    # real.py
    "RealRunSpec", "run_real",
    # run.py
    "Backend", "RunSpec", "run_one",
    # schedule.py
    "IterationTiming", "simulate_iteration",
    # stats.py
    "Interval", "Summary", "bootstrap_mean", "paired_ratios", "retarget", "summarize",
    # sweep.py
    "SweepSpec", "run_sweep",
]
