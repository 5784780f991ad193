"""What spec_lang hands to proofs (``docs/verifier-internals.md`` section 2)."""

from __future__ import annotations

from dataclasses import dataclass

from spec_lang.term import Binding, Term

__all__ = ["Problem", "Goal"]


@dataclass(frozen=True)
class Goal:
    """One plan output: ``expected == actual`` must hold on every rank.

    Attributes:
        name: ``"layers.0.mlp.w2"`` (updated parameter), ``"grad:layers.0.mlp.w2"``,
            ``"exp_avg:layers.0.mlp.w2"``, ``"loss"``.
        kind: ``"param" | "grad" | "state" | "loss"``.
        expected: the spec value through the output placement (no REGION nodes).
        actual: the plan's per-rank term, lowered (no REGION nodes).
        placement: human-readable, ``"dp: Replicate(), tp: Shard(F)"``.
        site: ``file:line`` where the plan produces it.
        layer: ``"layers.3"`` when the goal belongs to a repeated layer.
    """

    name: str
    kind: str
    expected: Term
    actual: Term
    placement: str
    site: str
    layer: str | None


@dataclass(frozen=True)
class Problem:
    """A spec, a plan and the goals relating them (one per plan output)."""

    path: str
    source_sha256: str
    binding: Binding
    mesh: dict[str, int]
    goals: tuple[Goal, ...]
    assumptions: tuple[str, ...]
    spec_outputs: dict[str, Term]
    rng: tuple = ()  # spec_lang.rng.DropoutRecord of every dropout call (proofs/rng.py checks them)
    # Plan(schedule=...): the Pipeline / Accumulation whose event order built the gradient
    # buffers (counterexamples name the stage and its events; proofs/counterexample.py)
    schedule: object = None
