"""trainer: a real torch Llama-style pipeline trainer and its recovery strategies.

Import-light: torch is imported only when `PipelineTrainer` or a strategy is used.
"""

from trainer.api import StepResult, TrainerConfig
from trainer.errors import StrategyError, TrainerError

__all__ = [
    # api
    "TrainerConfig",
    "StepResult",
    "PipelineTrainer",
    # errors
    "TrainerError",
    "StrategyError",
]


def __getattr__(name: str):
    if name == "PipelineTrainer":
        from trainer.pipeline import PipelineTrainer

        return PipelineTrainer
    raise AttributeError(f"module 'trainer' has no attribute {name!r}")
