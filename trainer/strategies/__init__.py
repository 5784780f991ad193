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
from trainer.strategies.checkfree import CheckFree
from trainer.strategies.checkfree_plus import CheckFreePlus
from trainer.strategies.checkpoint import Checkpointing, young_daly_interval
from trainer.strategies.no_failure import NoFailure
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
    # registry
    "STRATEGIES",
    "make_strategy",
]

STRATEGIES: dict[str, type[RecoveryStrategy]] = {
    cls.name: cls for cls in (NoFailure, CheckFree, CheckFreePlus, Checkpointing, RedundantComputation)
}


def make_strategy(name: str, **knobs) -> RecoveryStrategy:
    """The strategy registered as `name`, configured with `knobs` (fields of its Config)."""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise StrategyError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}")
    fields = [f.name for f in dataclasses.fields(cls.Config)]
    unknown = sorted(set(knobs) - set(fields))
    if unknown:
        raise StrategyError(f"strategy {name!r} has no knob {unknown[0]!r}; knobs: {', '.join(fields) or 'none'}")
    return cls(cls.Config(**knobs))
