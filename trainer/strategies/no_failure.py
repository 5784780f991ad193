"""The failure-free reference run (arXiv 2506.15461 section 5, "no failures").

No failures are injected for it: `on_failure` raises StrategyError if the simulator ever
delivers one, so a misconfigured sweep cannot silently report failure-free curves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from trainer.errors import StrategyError
from trainer.strategies.base import Action, RecoveryStrategy

__all__ = ["NoFailure"]


class NoFailure(RecoveryStrategy):
    """Reference: trains without failures; any failure delivered to it is an error."""

    name: ClassVar[str] = "no_failure"

    def on_failure(self, stages: Sequence[int], iteration: int) -> list[Action]:
        if not self._validate(stages):
            return []
        raise StrategyError(f"no_failure is the failure-free reference; got failure of stages {sorted(stages)} "
                            f"at iteration {iteration}")

    def recover(self, lost: tuple[int, ...], iteration: int) -> list[Action]:  # pragma: no cover - unreachable
        raise StrategyError("no_failure does not recover stages")

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["paper"] = "arXiv 2506.15461 section 5 (failure-free baseline)"
        return d
