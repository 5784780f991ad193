"""simulator: a simpy discrete-event harness that drives the real pipeline trainer.

simpy owns the clock: a cluster model (`cluster`, `presets`), pipeline schedules simulated
message by message (`schedule`), failure schedules (`failures`), action pricing (`cost`),
single runs (`run`), resumable sweeps with summaries and plots (`sweep`, `experiments`), and
the ``shardproof simulate`` command line (`cli`). docs/simulator.md is the reference.
"""

from simulator.calibrate import calibrate
from simulator.cluster import Cluster, LinkSpec, ring_allreduce_s
from simulator.cost import action_seconds, price_actions
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
from simulator.presets import local_cluster, paper_geo_cluster, paper_geo_iteration_times, paper_geo_report
from simulator.real import RealRunSpec, run_real
from simulator.run import Backend, RunSpec, run_one
from simulator.schedule import IterationTiming, simulate_iteration
from simulator.sweep import SweepSpec, run_sweep, summarize

__all__ = [
    # calibrate.py
    "calibrate",
    # cluster.py
    "Cluster", "LinkSpec", "ring_allreduce_s",
    # cost.py
    "action_seconds", "price_actions",
    # errors.py
    "SimulationError",
    # failures.py
    "FailureSchedule", "NoFailures", "BernoulliFailures", "HourlyFailures", "TraceFailures",
    "BambooTraceFailures", "bamboo_trace_stats", "make_failure_schedule", "FailureDraw", "MidIterationFailures",
    # host.py
    "SharedHost",
    # presets.py
    "local_cluster", "paper_geo_cluster", "paper_geo_iteration_times", "paper_geo_report",
    # real.py
    "RealRunSpec", "run_real",
    # run.py
    "Backend", "RunSpec", "run_one",
    # schedule.py
    "IterationTiming", "simulate_iteration",
    # sweep.py
    "SweepSpec", "run_sweep", "summarize",
]
