"""Obligations and their reuse: a goal identical to another up to the names of its inputs
(the same layer type in layers 0..31, the same rank-symmetry class) is proved once.

Grouping is two-stage so that it costs time linear in the distinct nodes of all goals:

1. a *shape key* per node, computed once over the shared DAG with INPUT names erased;
2. within a group of equal shape keys, an exact canonical key: inputs renamed ``$0, $1, ...``
   in first-occurrence order of a deterministic walk of ``(expected, actual)``.
"""

from __future__ import annotations

import hashlib
import re
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


_NOT_ONE_LAYER = frozenset({"#a", "#b"})   # an index set of size 2: leaves the one-pass path
_LAYER_INDEX = re.compile(r"((?:layers|blocks|h)\.)(\d+)")


def _layer_keys(roots: Sequence[Term]
                ) -> tuple[dict[int, bytes], dict[int, bytes], dict[int, frozenset[str]]]:
    """Per node: a hash with INPUT names erased, a hash with only the layer index in INPUT
    names erased (``layers.3.attn.wq`` -> ``layers.#.attn.wq``), and the set of layer indices
    below it (an input name already holding a ``#`` adds the index ``"#"``: the erasure is then
    not injective, and such goals leave the one-pass path). One pass over the shared DAG."""
    shape: dict[int, bytes] = {}
    keys: dict[int, bytes] = {}
    idx: dict[int, frozenset[str]] = {}
    empty: frozenset[str] = frozenset()
    for n in walk(list(roots)):
        h = hashlib.blake2b(digest_size=16)
        hs = hashlib.blake2b(digest_size=16)
        h.update(n.op.name.encode())
        hs.update(n.op.name.encode())
        if n.op is Op.INPUT:
            name = str(n.attrs[0])
            h.update(_attrs_key(n, _LAYER_INDEX.sub(r"\1#", name)).encode())
            hs.update(_attrs_key(n, None).encode())
            found = {m.group(2) for m in _LAYER_INDEX.finditer(name)}
            if "#" in name:
                found |= _NOT_ONE_LAYER   # the erasure is not injective on this name
            idx[id(n)] = frozenset(found) or empty
        else:
            a = _attrs_key(n, None).encode()
            h.update(a)
            hs.update(a)
            sets = {idx[id(c)] for c in n.args}
            sets.discard(empty)
            idx[id(n)] = empty if not sets else sets.pop() if len(sets) == 1 else \
                frozenset().union(*sets)
        for c in n.args:
            h.update(keys[id(c)])
            hs.update(shape[id(c)])
        keys[id(n)] = h.digest()
        shape[id(n)] = hs.digest()
    return shape, keys, idx


def group_identical(goals: Sequence[Any]) -> dict[str, str]:
    """``{goal name: name of the earlier goal it is a renaming of}`` for every reusable goal.

    Fast path (one pass over the shared DAG): goals whose terms are equal up to the layer index
    in their input names, and which each mention exactly one layer index, are renamings of each
    other (``layers.l`` -> ``layers.k`` in every name is a bijection, and it is the only way the
    positions can correspond). Other goals are compared by their exact canonical key.

    Every value is a *representative*: a goal that reuses nothing (never a name that is itself
    a key). The two keys partition differently (two parameters of one layer, e.g.
    ``layers.3.attention_norm`` and ``layers.3.ffn_norm``, can have equal canonical keys and
    different layer keys), so a fast-path match is sent on to its class's representative; a
    chain ``a -> b -> c`` left ``b`` unproved and every ``a`` open until the whole-term retry
    (issue 14: 1,191 of DeepSeek-V3's 1,244 cut premises). A composition of bijective input
    renamings is one, and the checker re-derives each ``rename`` step from its two equations."""
    roots = [t for g in goals for t in (g.expected, g.actual)]
    shape, keys, idx = _layer_keys(roots)
    groups: dict[tuple[str, bytes, bytes], list[Any]] = defaultdict(list)
    for g in goals:
        groups[(g.kind, shape[id(g.expected)], shape[id(g.actual)])].append(g)
    reuse: dict[str, str] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        first: dict[bytes, str] = {}
        one_layer: dict[tuple[bytes, bytes], str] = {}
        for g in members:
            layers = idx[id(g.expected)] | idx[id(g.actual)]
            if len(layers) == 1:   # ('#' in a name: not injective, _layer_keys)
                k2 = (keys[id(g.expected)], keys[id(g.actual)])
                if k2 in one_layer:
                    rep = one_layer[k2]
                    reuse[g.name] = reuse.get(rep, rep)   # rep's own class, if it has one
                    continue
                one_layer[k2] = g.name
            k = _canonical_key(g.expected, g.actual)
            if k in first:
                reuse[g.name] = first[k]
            else:
                first[k] = g.name
    return reuse
