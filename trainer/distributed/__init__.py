"""trainer.distributed: the real multi-process pipeline (issue 16, docs/real-runs.md).

One OS process per pipeline stage on torch.distributed's gloo backend (docs/decisions.md),
failures by SIGKILL, replacements that start empty, recoveries by real transfers between the
processes, checkpoint files on disk. `DistributedPipeline` (driver.py) is the entry point; the
simulator's real-run loop (simulator/real.py) drives it with the same failure schedules and the
strategies' planners (trainer.strategies.planned).

Import-light: torch loads when a pipeline is built.
"""

from trainer.distributed.control import WorkerLost
from trainer.distributed.launcher import DistributedError

__all__ = ["DistributedPipeline", "TrainOutcome", "Restarted", "PlanRun", "DistributedError", "WorkerLost"]


def __getattr__(name: str):
    if name in ("DistributedPipeline", "TrainOutcome", "Restarted", "PlanRun"):
        from trainer.distributed import driver

        return getattr(driver, name)
    raise AttributeError(f"module 'trainer.distributed' has no attribute {name!r}")
