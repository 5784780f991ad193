"""The model a cluster models: its bytes, independently of the model actually trained (issue 15).

A run trains a small torch model on this machine, but its cluster may stand for a much bigger
one (``paper-geo``: CheckFree's 500M LLaMa, 6 stages x 4 layers). Every transfer, replica,
checkpoint save and load is then priced with the bytes of the *modelled* model: a CheckFree
recovery moves two 268 MB stages, not two of the toy's 181 kB, and a checkpoint writes 5.6 GB.

Strategies say what an action's bytes are (``of_stages`` and ``optimizer`` on `Transfer`,
`StorageWrite`, `StorageRead`, trainer/strategies/base.py); `action_bytes` prices that content
with `ModelSize.content_bytes`. An action that does not say its content is scaled by the ratio
of the two models' total parameter bytes and counted (``scaled`` in a run's record), so a
strategy written before this interface still gets bytes of the right order.

Bytes: fp32 parameters (4 B each); torch's Adam keeps ``exp_avg`` and ``exp_avg_sq`` (2 x the
parameter bytes; the per-tensor ``step`` scalars are ignored at this scale).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulator.errors import SimulationError

__all__ = ["ModelSize", "action_bytes", "trained_model_size", "ADAM_BYTES_PER_PARAM_BYTE"]

ADAM_BYTES_PER_PARAM_BYTE = 2.0  # torch.optim.Adam: exp_avg + exp_avg_sq, fp32 like the parameters


@dataclass(frozen=True, kw_only=True)
class ModelSize:
    """Bytes of a modelled model (units in the names); stage indices 0..S as in trainer/api.py."""

    name: str
    stage_param_bytes: tuple[int, ...]  # fp32 parameter bytes of stage 0 (embedding stage) .. S
    activation_bytes: int  # one micro-batch hop between stages (activations forward, gradients back)
    tokens_per_iteration: int  # tokens one training iteration consumes (all DP replicas)
    micro_batches: int = 0  # micro-batches of one modelled iteration (the schedule priced); 0: the trainer's
    adam_bytes_per_param_byte: float = ADAM_BYTES_PER_PARAM_BYTE
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.stage_param_bytes) < 2:
            raise SimulationError(f"model {self.name!r}: need >= 2 stages, got {len(self.stage_param_bytes)}")
        for i, b in enumerate(self.stage_param_bytes):
            if not isinstance(b, int) or isinstance(b, bool) or b < 0:
                raise SimulationError(f"model {self.name!r}: stage {i} parameter bytes must be an int >= 0, got {b!r}")
        for what in ("activation_bytes", "tokens_per_iteration", "micro_batches"):
            v = getattr(self, what)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise SimulationError(f"model {self.name!r}: {what} must be an int >= 0, got {v!r}")
        if not self.adam_bytes_per_param_byte >= 0:
            raise SimulationError(f"model {self.name!r}: adam_bytes_per_param_byte must be >= 0, "
                                  f"got {self.adam_bytes_per_param_byte!r}")

    @property
    def n_stages(self) -> int:
        """Stage indices 0..S: S + 1."""
        return len(self.stage_param_bytes)

    @property
    def total_param_bytes(self) -> int:
        return sum(self.stage_param_bytes)

    def stage_state_bytes(self, stage: int) -> int:
        """Parameters + Adam state of one stage (B)."""
        return round(self.stage_param_bytes[stage] * (1.0 + self.adam_bytes_per_param_byte))

    def checkpoint_bytes(self) -> int:
        """A whole-model checkpoint: every stage's parameters and Adam state (B)."""
        return self.content_bytes(range(self.n_stages), optimizer=True)

    def content_bytes(self, of_stages: Sequence[int], optimizer: bool) -> int:
        """Bytes of the parameters of ``of_stages`` (and their Adam state when ``optimizer``)."""
        total = 0
        for s in of_stages:
            if not 0 <= s < self.n_stages:
                raise SimulationError(f"model {self.name!r}: stage {s} does not exist (stages 0..{self.n_stages - 1})")
            total += self.stage_state_bytes(s) if optimizer else self.stage_param_bytes[s]
        return total

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "stage_param_bytes": list(self.stage_param_bytes),
                "activation_bytes": self.activation_bytes, "tokens_per_iteration": self.tokens_per_iteration,
                "micro_batches": self.micro_batches, "adam_bytes_per_param_byte": self.adam_bytes_per_param_byte, "sources": dict(self.sources)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelSize:
        try:
            return cls(name=d["name"], stage_param_bytes=tuple(d["stage_param_bytes"]),
                       activation_bytes=d["activation_bytes"], tokens_per_iteration=d["tokens_per_iteration"],
                       micro_batches=d.get("micro_batches", 0),
                       adam_bytes_per_param_byte=d.get("adam_bytes_per_param_byte", ADAM_BYTES_PER_PARAM_BYTE),
                       sources=dict(d.get("sources", {})))
        except (KeyError, TypeError) as exc:
            raise SimulationError(f"not a model size description: {exc}") from None


def trained_model_size(trainer: Any, tokens_per_iteration: int = 0) -> ModelSize:
    """The bytes of the model a trainer actually trains (its `stage_param_bytes`, `activation_bytes`)."""
    n = trainer.n_stages + 1
    return ModelSize(name="trained", stage_param_bytes=tuple(int(trainer.stage_param_bytes(s)) for s in range(n)),
                     activation_bytes=int(trainer.activation_bytes()), tokens_per_iteration=int(tokens_per_iteration),
                     sources={"all": "the trainer's stage_param_bytes() / activation_bytes()"})


def action_bytes(action: Any, model: ModelSize | None, trained: ModelSize | None) -> tuple[int, bool]:
    """(bytes to price, scaled?) of a Transfer / StorageWrite / StorageRead.

    No modelled model: the action's own ``nbytes``. Content said (``of_stages``): the modelled
    model's bytes of that content. Content not said: ``nbytes`` x modelled / trained total
    parameter bytes, and ``scaled`` is True.
    """
    nbytes = int(action.nbytes)
    if model is None:
        return nbytes, False
    of_stages = tuple(getattr(action, "of_stages", ()) or ())
    if of_stages:
        return model.content_bytes(of_stages, bool(getattr(action, "optimizer", False))), False
    if trained is None or trained.total_param_bytes == 0:
        return nbytes, False
    return round(nbytes * model.total_param_bytes / trained.total_param_bytes), True
