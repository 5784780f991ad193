"""What spec_lang hands to proofs (``docs/verifier-internals.md`` section 2)."""

from __future__ import annotations

from dataclasses import dataclass

from spec_lang.term import Binding, Term

__all__ = ["Problem", "Goal", "CutPoint"]


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
class CutPoint:
    """A value both traces mark under one name (``ops.layer_boundary``, a gradient handed to
    the optimizer, a squared gradient norm), or the adjoint of such a boundary.

    Attributes:
        name: ``"layers.3"``, ``"layers.3.out"``, ``"grad:layers.3.attn.wq"``, ``"grad_norm_sq"``.
        spec: the spec's term (full tensor, e.g. ``(B, S, H)``).
        plan: the plan's per-rank term (lowered).
        kind: ``"forward"`` (the value) or ``"backward"`` (the loss's adjoint at that value).
    """

    name: str
    spec: Term
    plan: Term
    kind: str


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
    # marked boundaries of both traces: where the prover may cut obligations (proofs/cut.py)
    cut_points: tuple = ()
    # plan outputs whose value could not be lowered (the PyTorch front end: an op without a
    # lowering rule): (goal name, reason naming the op and the user's line). Such a problem is
    # never EQUIVALENT (proofs/prover.py makes its verdict UNKNOWN at best).
    unsupported: tuple[tuple[str, str], ...] = ()
    # the front end that traced the file ("dsl": spec_lang.load, "torch":
    # spec_lang.torch_frontend.load); the certificate records it
    # and the checker's re-trace uses the same one (proofs/isolation.py)
    frontend: str = "dsl"
