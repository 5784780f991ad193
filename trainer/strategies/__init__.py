"""Recovery strategies behind one interface (docs/harness-contract.md) and their registry.

`STRATEGIES` maps the contract's names to classes; `make_strategy(name, **knobs)` builds one from
its Config knobs and raises StrategyError (one line) for an unknown name or knob.
"""

from __future__ import annotations

import dataclasses

from trainer.errors import StrategyError
from trainer.strategies.base import (
    Action,
    RecoveryStrategy,
    Restart,
    Rollback,
    StorageRead,
    StorageWrite,
    Transfer,
)
from trainer.strategies.adaptive import Adaptive
from trainer.strategies.checkfree import CheckFree
from trainer.strategies.checkfree_adam import CheckFreeAdam
from trainer.strategies.checkfree_plus import CheckFreePlus
from trainer.strategies.checkpoint import Checkpointing, young_daly_interval
from trainer.strategies.gemini import Gemini
from trainer.strategies.neighbour_copy import NeighbourCopy
from trainer.strategies.no_failure import NoFailure
from trainer.strategies.paper_plans import PAPER_PLANS
from trainer.strategies.planned import PlannedStrategy
from trainer.strategies.redundant import RedundantComputation

__all__ = [
    # base
    "Action",
    "RecoveryStrategy",
    "Restart",
    "Rollback",
    "StorageRead",
    "StorageWrite",
    "Transfer",
    # strategies
    "CheckFree",
    "CheckFreePlus",
    "Checkpointing",
    "NoFailure",
    "RedundantComputation",
    "young_daly_interval",
    # ours (issue 16), written as planners
    "CheckFreeAdam",
    "NeighbourCopy",
    "Gemini",
    "Adaptive",
    "PlannedStrategy",
    # registry
    "STRATEGIES",
    "PAPER_STRATEGIES",
    "NEW_STRATEGIES",
    "make_strategy",
    "make_planned_strategy",
]

PAPER_STRATEGIES = ("no_failure", "checkfree", "checkfree_plus", "checkpoint", "redundant")
NEW_STRATEGIES = ("checkfree_adam", "neighbour_copy", "gemini", "adaptive")  # issue 16, docs/trainer.md

STRATEGIES: dict[str, type[RecoveryStrategy]] = {
    cls.name: cls for cls in (NoFailure, CheckFree, CheckFreePlus, Checkpointing, RedundantComputation,
                              CheckFreeAdam, NeighbourCopy, Gemini, Adaptive)
}


def _configured(name: str, cls: type[RecoveryStrategy], knobs: dict) -> RecoveryStrategy:
    fields = [f.name for f in dataclasses.fields(cls.Config)]
    unknown = sorted(set(knobs) - set(fields))
    if unknown:
        raise StrategyError(f"strategy {name!r} has no knob {unknown[0]!r}; knobs: {', '.join(fields) or 'none'}")
    return cls(cls.Config(**knobs))


def make_strategy(name: str, **knobs) -> RecoveryStrategy:
    """The strategy registered as `name`, configured with `knobs` (fields of its Config)."""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise StrategyError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    return _configured(name, cls, knobs)


def make_planned_strategy(name: str, **knobs) -> PlannedStrategy:
    """The strategy `name` as a planner (for runs that execute plans, trainer.distributed).

    The paper's strategies come from `trainer.strategies.paper_plans` (same decisions as the
    classes of `STRATEGIES`); the strategies of issue 16 are planners already.
    """
    cls = PAPER_PLANS.get(name) or STRATEGIES.get(name)
    if cls is None:
        raise StrategyError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    if not issubclass(cls, PlannedStrategy):  # pragma: no cover - every registered strategy has a planner
        raise StrategyError(f"strategy {name!r} has no planner")
    return _configured(name, cls, knobs)
