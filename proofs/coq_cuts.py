"""Class cuts spelled out for the Coq checker.

A ``cut`` step may instantiate its class's lemma directly: the lemma is the representative
layer's, its other inputs renamed bijectively onto the goal's (``docs/certificate.md``, cut
steps; issue 14 item 2), so the certificate holds one lemma per layer class instead of one per
layer. The Coq checker (``proofs/coq/Steps.v``) checks a cut whose lemma proves *exactly*
``lhs[spec := var] == rhs[plan := embed]``, and a ``rename`` step separately. This module,
which is not trusted (Coq re-checks what it produces), rewrites a certificate so that every cut
is of that exact form: it adds the instance's lemma terms to the node table (hash-consed,
appended after their children) and a ``rename`` step from the class's lemma to them before the
cut, renumbering every step reference.

Raises:
    ExportError: a cut or step reference the rewriting does not understand.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["expand_class_cuts"]


class _Rows:
    """The certificate's node rows, extended on demand (hash-consed by their JSON)."""

    def __init__(self, rows: list[Any]):
        self.rows = list(rows)
        self.ids = {json.dumps(r): i for i, r in enumerate(self.rows)}

    def subst(self, root: int, m: dict[int, int]) -> int:
        """``root[m]``: each node in ``m`` replaced by its image, the nodes above rebuilt."""
        memo: dict[int, int] = {}
        stack = [root]
        while stack:
            n = stack[-1]
            if n in memo:
                stack.pop()
                continue
            if n in m:
                memo[n] = m[n]
                stack.pop()
                continue
            op, args, attrs, dims = self.rows[n]
            todo = [c for c in args if c not in memo]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            new = [memo[c] for c in args]
            if new == list(args):
                memo[n] = n
                continue
            row = [op, new, attrs, dims]
            key = json.dumps(row)
            if key not in self.ids:
                self.ids[key] = len(self.rows)
                self.rows.append(row)
            memo[n] = self.ids[key]
        return memo[root]


def expand_class_cuts(cert: dict[str, Any]) -> dict[str, Any]:
    """``cert`` with every class cut (its lemma not exactly its own cut terms) preceded by the
    ``rename`` step that states its own cut terms; unchanged when there is none. Step numbers
    in ``steps`` and the obligations' ``proof`` are renumbered; the input is not modified."""
    from proofs.coq_export import ExportError

    rows = _Rows(cert["nodes"])
    steps = cert["steps"]
    extra: dict[int, tuple[int, int]] = {}   # cut step -> the lemma sides it needs
    for k, st in enumerate(steps):
        if st.get("kind") != "cut":
            continue
        try:
            lem = steps[st["lemma"]]
            e2 = rows.subst(st["lhs"], {c["spec"]: c["var"] for c in st["cuts"]})
            a2 = rows.subst(st["rhs"], {c["plan"]: c["embed"] for c in st["cuts"]})
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ExportError(f"step {k} (cut): not a cut step of this format "
                              f"({type(e).__name__})") from None
        if (lem["lhs"], lem["rhs"]) != (e2, a2):
            extra[k] = (e2, a2)
    if not extra:
        return cert
    new_index: list[int] = []
    out: list[dict[str, Any]] = []
    renames: dict[int, int] = {}
    for k, st in enumerate(steps):
        if k in extra:
            renames[k] = len(out)
            out.append({"kind": "rename", "lhs": extra[k][0], "rhs": extra[k][1],
                        "of": st["lemma"]})          # renumbered below with the rest
        new_index.append(len(out))
        out.append(st)
    out = [_renumber(st, new_index) for st in out]
    for k, j in renames.items():       # the cut now cites its rename (already renumbered)
        out[new_index[k]]["lemma"] = j
    obs = [dict(o, proof=new_index[o["proof"]]) if isinstance(o.get("proof"), int) else o
           for o in cert["obligations"]]
    return {**cert, "nodes": rows.rows, "steps": out, "obligations": obs}


def _renumber(st: dict[str, Any], new: list[int]) -> dict[str, Any]:
    """A copy of step ``st`` with every step reference ``s`` replaced by ``new[s]``."""
    st = dict(st)
    kind = st.get("kind")
    if kind == "trans":
        st["steps"] = [new[s] for s in st["steps"]]
    elif kind == "congr":
        st["args"] = [None if s is None else new[s] for s in st["args"]]
    elif kind in ("sym", "rename"):
        st["of"] = new[st["of"]]
    elif kind == "cut":
        st["lemma"] = new[st["lemma"]]
        st["cuts"] = [dict(c, premise=new[c["premise"]]) for c in st["cuts"]]
    return st
