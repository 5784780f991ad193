"""Exceptions of the trainer package.

One base, `TrainerError`, for everything a user can act on: data missing, offline with no
cache, bad config, unknown strategy. Messages are one line (STYLE.md rule 15); the CLI maps
the base to exit code 3 (docs/harness-contract.md).
"""

from __future__ import annotations

__all__ = ["TrainerError", "StrategyError"]


class TrainerError(Exception):
    """Base of every error the trainer raises for bad input (one-line message)."""


class StrategyError(TrainerError):
    """Unknown recovery strategy name, bad strategy knob, or a failure the strategy cannot handle."""
