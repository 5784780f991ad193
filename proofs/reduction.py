"""Shape reduction: small dim sizes at which refutation and the Z3 fallback run.

Mesh axis sizes (and the micro-batch count ``mb``) keep their real values: the plan's
collectives, scales and shard ownership are exercised exactly as on the real mesh. Dims shrink:

* a dim that a shard or chunk touches becomes a multiple of the product of the sizes along
  every shard tuple it carries (``B`` over ``(dp, mb)`` -> a multiple of ``|dp| * |mb|``), times
  2 (>= 2 elements per shard) when that stays under ``cheap`` elements;
* other dims become ``base`` (3 by default: odd, so that an unintended split shows);
* dims with equal real sizes get equal reduced sizes (so any equal-size requirement between
  dims, e.g. the query and key sequence of a causal mask, still holds);
* a dim never grows past its real size (the real size satisfies every divisibility the plan
  needs).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

from spec_lang.term import Binding, Term, walk

__all__ = ["MESH_AXES", "reduce_binding", "shard_products"]

MESH_AXES = ("dp", "tp", "pp", "cp", "sp", "ep", "mb")


def _axis_size(binding: Mapping[str, int], a: str) -> int:
    return int(a.split("/")[1]) if a.startswith("#") else binding[a]


def shard_products(roots: Iterable[Term], binding: Mapping[str, int]) -> dict[str, int]:
    """For each dim name: the lcm over its shard tuples of the product of their sizes."""
    req: dict[str, int] = defaultdict(lambda: 1)
    for t in walk(list(roots)):
        for d in t.dims:
            p = math.prod(_axis_size(binding, a) for a in d.shards)
            req[d.name] = math.lcm(req[d.name], p)
        if t.op.name == "INPUT" and len(t.attrs) > 3:  # index inputs range over a dim
            req.setdefault(t.attrs[3], 1)
    return dict(req)


def reduce_binding(roots: Iterable[Term], binding: Binding, *, base: int = 3,
                   cheap: int = 4096) -> Binding:
    """A binding with the same mesh axes and reduced dims (see the module docstring)."""
    roots = list(roots)
    req = shard_products(roots, binding)
    groups: dict[int, list[str]] = defaultdict(list)
    for name in binding:
        if name in MESH_AXES or name not in req:
            continue
        groups[binding[name]].append(name)
    sizes = dict(binding)
    for real, names in groups.items():
        need = math.lcm(*(req[n] for n in names))
        if need == 1:
            size = base
        elif need * 2 <= cheap:
            size = need * 2
        else:
            size = need
        size = min(size, real)  # the real size satisfies every divisibility the plan needs
        for n in names:
            sizes[n] = size
    return Binding(sizes)
