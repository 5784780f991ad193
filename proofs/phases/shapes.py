"""The ``reduce`` phase: reduced dim sizes for the refuter, a reduced mesh for its searches, and
the spec's denominators (``docs/soundness.md``, ``docs/rank-symmetry.md``,
``proofs/denominators.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proofs.phases.ledger import GoalResult
from proofs.reduction import MESH_AXES, MeshReduction, reduce_binding, reduce_mesh
from spec_lang.term import Binding, Op, Term, walk

__all__ = ["Shapes", "reduce_shapes", "real_mesh"]


@dataclass(frozen=True)
class Shapes:
    """What ``reduce`` found.

    Attributes:
        reduced: the binding with dims reduced (mesh axes and micro-batches at their real size).
        mesh: the real mesh axis sizes (``MESH_AXES`` present in the binding).
        mesh_red: the program on a mesh cut to a few coordinates per axis
            (:func:`proofs.reduction.reduce_mesh`; ``reduced`` False when no axis was cut).
        dens: the spec's denominators (:class:`proofs.denominators.SpecDenominators`).
        assumptions: the verdict's lines about them (the mask domain, assumed denominators).
    """

    reduced: Binding
    mesh: Mapping[str, int]
    mesh_red: MeshReduction
    dens: Any
    assumptions: tuple[str, ...]


def real_mesh(binding: Binding) -> dict[str, int]:
    """The mesh axes of ``binding`` with their sizes."""
    return {a: int(n) for a, n in binding.items() if a in MESH_AXES}


def reduce_shapes(problem: Any, goals: list[GoalResult]) -> Shapes:
    """Reduce ``problem`` (a :class:`spec_lang.problem.Problem`) for the refuter; a goal whose
    terms still hold a REGION node gets that as its reason (it is never proved)."""
    from proofs.denominators import spec_denominators

    # the spec's denominators: settled by the input domains, or assumed (listed)
    dens = spec_denominators([g.expected for g in goals])
    roots = [t for g in goals for t in (g.expected, g.actual)]
    reduced = reduce_binding(roots, problem.binding)
    # the refuter's search runs on a reduced mesh too (docs/rank-symmetry.md)
    mesh_red = reduce_mesh([t for g in problem.goals for t in (g.expected, g.actual)],
                           problem.binding)
    # goals must be lowered (no REGION left): one walk over the shared DAG
    if any(t.op is Op.REGION for t in walk(roots)):
        for g in goals:
            if unlowered(g.expected, g.actual):
                g.reason = "a REGION node was not lowered (internal)"
    return Shapes(reduced, real_mesh(problem.binding), mesh_red, dens,
                  tuple(dens.assumption_lines()))


def unlowered(*roots: Term) -> str:
    """Why the terms cannot be proved as they are (a REGION node left), or ``""``."""
    for t in walk(list(roots)):
        if t.op is Op.REGION:
            return "a REGION node was not lowered (internal)"
    return ""
