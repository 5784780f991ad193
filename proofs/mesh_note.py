"""``prove --torch``'s note, before tracing, that the verdict cannot be EQUIVALENT because the
declared mesh has ranks that are not traced (``docs/unknown.md#untraced-ranks``).

The tracing takes minutes on a large mesh and only then reported UNKNOWN "ranks off the mesh's
axes are not traced" (new-user trial 53, item C). The note is read from the train file's text
alone (``ast``: nothing of the file runs in ``prove``'s process): a module-level ``MESH = {...}``
assigned once, as a literal dict of names to ints. A ``MESH`` computed at run time gives no note;
the verdict does not depend on this module (the front end decides it:
``spec_lang.torch_frontend.traced_ranks.untraced_ranks``, whose rule this calls).
"""

from __future__ import annotations

import ast
import math
import os

__all__ = ["untraced_note"]


def _literal_mesh(source: bytes) -> tuple[dict[str, int], int] | None:
    """``(MESH, its line)`` when the file assigns ``MESH`` once at module level to a literal
    dict of str -> int; None otherwise (a syntax error too, or a file too deeply nested for
    ``ast``: the trace reports it; prove exited 1 with a traceback, R53b-3)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):   # deep nesting (R53b-3)
        return None
    found = []
    for n in tree.body:
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == "MESH" for t in targets):
            found.append(n)
    if len(found) != 1 or not isinstance(found[0], (ast.Assign, ast.AnnAssign)) \
            or found[0].value is None:
        return None
    try:
        mesh = ast.literal_eval(found[0].value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(mesh, dict) or not all(
            isinstance(k, str) and type(v) is int and v > 0 for k, v in mesh.items()):
        return None
    return mesh, found[0].lineno


def untraced_note(source: bytes, path: str) -> str | None:
    """One stderr line, ``prove: note: MESH {'dp': 4, 'tp': 4} (train.py:7) has 16 ranks ...``,
    when the literal ``MESH`` of the train file ``source`` has ranks ``prove --torch`` does not
    trace (more than 8 ranks, two or more axes of size > 1); None otherwise."""
    from spec_lang.torch_frontend.traced_ranks import FULL_TRACE_RANKS, untraced_ranks

    got = _literal_mesh(source)
    if got is None or untraced_ranks(got[0]) is None:
        return None
    mesh, line = got
    return (f"prove: note: MESH {mesh} ({os.path.basename(path)}:{line}) has "
            f"{math.prod(mesh.values())} ranks and two or more axes of size > 1: the ranks off "
            f"its axes are not traced, so the verdict will not be EQUIVALENT (UNKNOWN, unless a "
            f"traced rank differs); the trace still runs. To prove the code, declare a mesh of "
            f"at most {FULL_TRACE_RANKS} ranks (e.g. {{\"dp\": 2, \"tp\": 4}}) or one axis; "
            f"docs/unknown.md#untraced-ranks")
