"""Exceptions of the simulator package.

One base, `SimulationError`, for everything a user can act on: bad cluster numbers, failure
rates outside [0, 1), a trace naming a stage that does not exist, a corrupt results file,
an unknown executor. Messages are one line (docs/STYLE.md rule 15); `simulator.cli` alone
maps the base (and the trainer's `TrainerError`) to exit code 3.
"""

from __future__ import annotations

__all__ = ["SimulationError"]


class SimulationError(Exception):
    """Base of every error the simulator raises for bad input (one-line message)."""
