"""Shape reduction: small dim sizes at which refutation and the Z3 fallback run.

Mesh axis sizes (and the micro-batch count ``mb``) keep their real values: the plan's
collectives, scales and shard ownership are exercised exactly as on the real mesh. Dims shrink:

* a dim that a shard or chunk touches becomes a multiple of the product of the sizes along
  every shard tuple it carries (``B`` over ``(dp, mb)`` -> a multiple of ``|dp| * |mb|``), times
  2 (>= 2 elements per shard) when that stays under ``cheap`` elements;
* other dims become ``base`` (3 by default: odd, so that an unintended split shows);
* dims that must keep a size ratio shrink together by one common factor: dims related by a
  ``RENAME`` (a RoPE half ``HD_half`` is half of ``HD``) and dims of equal real size (the
  query and key sequence of a causal mask), so every relation the real sizes satisfy still
  holds;
* a dim a ``TOPK_MASK`` selects along keeps at least ``k + 2`` elements (:func:`min_sizes`):
  below ``k`` top-k selects everything and the refuter could not see a selection bug (a
  bottom-k plan, ``k`` off by one); ``k + 2`` leaves room for both ``k - 1`` and ``k + 1``;
* a dim never grows past its real size (the real size satisfies every divisibility the plan
  needs).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

from spec_lang.term import Binding, Op, Term, walk

__all__ = ["MESH_AXES", "reduce_binding", "shard_products", "min_sizes"]

MESH_AXES = ("dp", "tp", "pp", "cp", "sp", "ep", "mb", "dp_replicate", "dp_shard")


def _axis_size(binding: Mapping[str, int], a: str) -> int:
    return int(a.split("/")[1]) if a.startswith("#") else binding[a]


def shard_products(roots: Iterable[Term], binding: Mapping[str, int]) -> tuple[
        dict[str, int], list[tuple[str, str]]]:
    """For each dim name: the lcm over its shard tuples of the product of their sizes; and the
    pairs of dims related by a RENAME."""
    req: dict[str, int] = defaultdict(lambda: 1)
    pairs: list[tuple[str, str]] = []
    for t in walk(list(roots)):
        for d in t.dims:
            p = math.prod(_axis_size(binding, a) for a in d.shards)
            req[d.name] = math.lcm(req[d.name], p)
        if t.op is Op.INPUT and len(t.attrs) > 3:  # index inputs range over a dim
            req[t.attrs[3]] = req[t.attrs[3]]
        if t.op is Op.RENAME and t.attrs[0] != t.attrs[1]:
            pairs.append((t.attrs[0], t.attrs[1]))
        if t.op is Op.PERMUTE:  # the block order needs len(order) equal blocks of the local dim
            d = t.dim(t.attrs[0])
            p = math.prod(_axis_size(binding, a) for a in d.shards) * len(t.attrs[1])
            req[d.name] = math.lcm(req[d.name], p)
    return dict(req), pairs


def min_sizes(roots: Iterable[Term]) -> dict[str, int]:
    """Dim name -> least reduced size: ``k + 2`` for a dim a ``TOPK_MASK(x, dim, k)`` selects
    along (the largest ``k`` over every such mask)."""
    need: dict[str, int] = {}
    for t in walk(list(roots)):
        if t.op is Op.TOPK_MASK:
            d, k = str(t.attrs[0]), int(t.attrs[1])
            need[d] = max(need.get(d, 0), k + 2)
    return need


def reduce_binding(roots: Iterable[Term], binding: Binding, *, base: int = 3,
                   cheap: int = 1024) -> Binding:
    """A binding with the same mesh axes and reduced dims (see the module docstring)."""
    roots = list(roots)
    req, pairs = shard_products(roots, binding)
    need = min_sizes(roots)
    dims = [n for n in binding if n not in MESH_AXES and n in req]
    parent = {n: n for n in dims}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    def union(a: str, b: str) -> None:
        if a in parent and b in parent:
            parent[find(a)] = find(b)

    for a, b in pairs:
        union(a, b)
    by_size: dict[int, str] = {}
    for n in dims:
        union(n, by_size.setdefault(binding[n], n))
    comps: dict[str, list[str]] = defaultdict(list)
    for n in dims:
        comps[find(n)].append(n)
    sizes = dict(binding)
    for members in comps.values():
        g = math.gcd(*(binding[n] for n in members))
        q = {n: binding[n] // g for n in members}
        # reduced(n) = q[n] * u; n's shard product must divide it
        u0 = math.lcm(*(req[n] // math.gcd(req[n], q[n]) for n in members))
        if u0 == 1 and all(req[n] == 1 for n in members):
            u = base
        elif max(q[n] for n in members) * u0 * 2 <= cheap:
            u = 2 * u0
        else:
            u = u0
        for n in members:  # a top-k dim keeps k + 2 elements (u stays a multiple of u0)
            if n in need and q[n] * u < need[n]:
                u = max(u, u0 * -(-need[n] // (q[n] * u0)))
        if u > g:  # never past the real sizes (which satisfy every requirement)
            u = g
        for n in members:
            sizes[n] = q[n] * u
    return Binding(sizes)
