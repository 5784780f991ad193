"""Which ranks of the mesh ``prove --torch`` traces (adversarial finding R3-2).

The plan is captured on every coordinate of each mesh axis alone and, on a mesh of at most
:data:`FULL_TRACE_RANKS` ranks, on every rank; :class:`~spec_lang.torch_frontend.literals.Traces`
aligns the traces and checks the ranks off the axes (the corners) against the ranks on them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

__all__ = ["FULL_TRACE_RANKS", "rank_coords", "untraced_ranks"]

# a mesh of at most this many ranks is traced at every rank (corners included); a larger mesh
# with two or more axes of size > 1 has untraced corners, hence UNKNOWN (finding R3-2)
FULL_TRACE_RANKS = 8


def rank_coords(mesh: Mapping[str, int]) -> list[dict[str, int]]:
    """Coordinates traced: all zeros, then every other coordinate of each axis alone (so on a
    one-axis mesh every rank is traced: adversarial finding R3-2, a last rank of dp = 4 that
    doubled its gradient was never traced when only coordinates 0-2 were), then, on a mesh of
    at most :data:`FULL_TRACE_RANKS` ranks, every rank off the axes (``(dp=1, tp=1)``), which
    :class:`~spec_lang.torch_frontend.literals.Traces` checks against the ranks on the axes."""
    base = {a: 0 for a in mesh}
    out = [dict(base)]
    for a, n in mesh.items():
        for c in range(1, n):
            out.append({**base, a: c})
    if math.prod(mesh.values()) <= FULL_TRACE_RANKS:
        for combo in itertools.product(*(range(n) for n in mesh.values())):
            c = dict(zip(mesh, combo))
            if sum(1 for a in mesh if c[a] != 0) >= 2:
                out.append(c)
    return out


def untraced_ranks(mesh: Mapping[str, int]) -> str | None:
    """Why some ranks are not traced (None when :func:`rank_coords` covers every rank): ranks
    that move along two or more axes at once (a corner rank of a dp x tp mesh) could run a
    different program (finding R3-2), so the verdict cannot be EQUIVALENT."""
    moving = [a for a, n in mesh.items() if n > 1]
    if len(moving) < 2 or math.prod(mesh.values()) <= FULL_TRACE_RANKS:
        return None
    corner = {a: (1 if a in moving[:2] else 0) for a in mesh}
    return (f"ranks off the axes of the mesh {dict(mesh)} (e.g. {corner}) are not traced: only "
            "ranks that differ from rank 0 along one axis are; prove a one-axis mesh of the same "
            "code, or check the corner ranks with the oracle of tests/torch_frontend")
