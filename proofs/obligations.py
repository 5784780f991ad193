"""Obligations and their reuse: a goal identical to another up to the names of its inputs
(the same layer type in layers 0..31, the same rank-symmetry class) is proved once.

Grouping is two-stage so that it costs time linear in the distinct nodes of all goals:

1. a *shape key* per node, computed once over the shared DAG with INPUT names erased;
2. within a group of equal shape keys, an exact canonical key: inputs renamed ``$0, $1, ...``
   in first-occurrence order of a deterministic walk of ``(expected, actual)``.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from spec_lang.term import Op, Term, walk

__all__ = ["group_identical"]


def _attrs_key(t: Term, name: str | None) -> str:
    attrs = t.attrs
    if t.op is Op.INPUT:
        attrs = (name,) + tuple(attrs[1:])
    return repr(attrs) + repr([(d.name, d.shards) for d in t.dims])


def _shape_keys(roots: Sequence[Term]) -> dict[int, bytes]:
    keys: dict[int, bytes] = {}
    for n in walk(list(roots)):
        h = hashlib.blake2b(digest_size=16)
        h.update(n.op.name.encode())
        h.update(_attrs_key(n, None).encode())
        for c in n.args:
            h.update(keys[id(c)])
        keys[id(n)] = h.digest()
    return keys


def _canonical_key(e: Term, a: Term) -> bytes:
    names: dict[str, str] = {}
    order = walk([e, a])  # deterministic: children in order, roots in order
    for n in order:
        if n.op is Op.INPUT and n.attrs[0] not in names:
            names[n.attrs[0]] = f"${len(names)}"
    keys: dict[int, bytes] = {}
    for n in order:
        h = hashlib.blake2b(digest_size=16)
        h.update(n.op.name.encode())
        h.update(_attrs_key(n, names.get(n.attrs[0]) if n.op is Op.INPUT else None).encode())
        for c in n.args:
            h.update(keys[id(c)])
        keys[id(n)] = h.digest()
    return keys[id(e)] + keys[id(a)]


def group_identical(goals: Sequence[Any]) -> dict[str, str]:
    """``{goal name: name of the earlier goal it is a renaming of}`` for every reusable goal."""
    keys = _shape_keys([t for g in goals for t in (g.expected, g.actual)])
    groups: dict[tuple[str, bytes, bytes], list[Any]] = defaultdict(list)
    for g in goals:
        groups[(g.kind, keys[id(g.expected)], keys[id(g.actual)])].append(g)
    reuse: dict[str, str] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        first: dict[bytes, str] = {}
        for g in members:
            k = _canonical_key(g.expected, g.actual)
            if k in first:
                reuse[g.name] = first[k]
            else:
                first[k] = g.name
    return reuse
