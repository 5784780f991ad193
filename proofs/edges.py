"""Edge cases of the declared input domains that the refuter draws on purpose (issue 10).

Random draws almost never produce a fully padded sequence: with a keep probability of 0.3-0.9
per token, a row of 8 zeros has probability below 1e-4. A plan that divides by a per-sequence,
per-rank or per-micro-batch token count (and multiplies back) is equal to the spec on every such
draw and NaN where a count is 0. So for the goals whose plan side has a denominator (radicand,
``LOG`` argument) that the input domains do not show to fit (:mod:`rewriting.signs`), the
refuter also draws:

* for every ``mask`` input and each of its dims ``d``: the mask with block 1 of each partition
  of ``d`` the plan uses set to 0 -- one index (``sequence 1 is fully padded``), the blocks of
  the mesh axes sharding ``d`` outermost first (``rank dp=1's share``, ``micro-batch 1``), the
  chunks of a ``CHUNK`` -- finest first. Block 0 keeps its first element, which the sampler sets
  to 1: the global token count stays > 0, as the mask domain declares;
* for every ``real`` input that only reaches the score operand of a ``TOPK_MASK`` (a selection
  bias, such as DeepSeek-V3's ``e_score_correction_bias``) and has the top-k's dim: index 1
  set to ``-EXCLUDE`` (that expert receives no tokens). Softmax-gated routing without such a
  bias has no input that empties an expert for sure; random draws remain the only search there.

Each edge case is a descriptor :func:`proofs.replay.apply_edge` applies (and the checker
replays); ``text`` says what the input was.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rewriting.signs import CONTEXT_FREE, POS, iter_partial_node
from spec_lang.term import Binding, Op, Term, walk

__all__ = ["needs_edges", "edge_cases", "EDGE_DRAWS_MAX"]

EDGE_DRAWS_MAX = 8


def needs_edges(actuals: Sequence[Term]) -> list[bool]:
    """Per plan term: it has a partial op whose argument may not fit on a domain-valid input
    (one walk over the shared DAG). The input domains decide (:mod:`rewriting.signs`), and a
    token count all-reduced over every axis that shards the mask is the whole mask's total
    (what normalisation would show): ``all_reduce(sum(mask[B on this dp rank]), dp)`` fits."""
    below: dict[int, bool] = {}
    covers: dict[int, frozenset[str] | None] = {}
    for t in walk(list(actuals)):
        covers[id(t)] = _missing_axes(t, covers)
        own = False
        for _, d, r in iter_partial_node(t):
            own = bool(CONTEXT_FREE.sign(d) & ~r) and not (covers[id(d)] == frozenset()
                                                          and r & POS)
        below[id(t)] = own or any(below[id(c)] for c in t.args)
    return [below[id(t)] for t in actuals]


def _missing_axes(t: Term, covers: dict[int, frozenset[str] | None]) -> frozenset[str] | None:
    """For a positive multiple of a sum of whole-mask shares: the mesh axes whose all-reduce is
    still missing (empty: the whole mask's total, > 0); else None."""
    if t.op is Op.ALL_REDUCE and t.attrs[1] == "sum":
        m = covers[id(t.args[0])]
        return None if m is None else m - {t.attrs[0]}
    if t.op is Op.EINSUM:
        shares = [covers_share(x, set(t.attrs[0])) for x in t.args]
        hit = [k for k, m in enumerate(shares) if m is not None]
        if len(hit) == 1 and all(CONTEXT_FREE.sign(x) == POS
                                 for k, x in enumerate(t.args) if k != hit[0]):
            return shares[hit[0]]
    return None


def covers_share(x: Term, out: set[str]) -> frozenset[str] | None:
    """``x`` is a mask input under ``SHARD`` s and ``PERMUTE`` s only, all its dims summed (not in
    ``out``): the axes of those shards."""
    axes: list[str] = []
    while x.op is Op.SHARD or x.op is Op.PERMUTE:   # a permutation keeps the total
        if x.op is Op.SHARD:
            axes.append(x.attrs[1])
        x = x.args[0]
    if x.op is Op.INPUT and x.attrs[2] == "mask" and x.dims and \
            not any(d.name in out for d in x.dims):
        return frozenset(axes)
    return None


def edge_cases(roots: Sequence[Term], binding: Binding) -> list[dict[str, Any]]:
    """Edge-case descriptors for the inputs below ``roots`` at ``binding`` (module docstring),
    finest first per input dim, at most ``EDGE_DRAWS_MAX``."""
    nodes = walk(list(roots))
    masks = [t for t in nodes if t.op is Op.INPUT and t.attrs[2] == "mask"]
    shards: dict[str, set[tuple[str, ...]]] = {}
    for t in nodes:
        for d in t.dims:
            if d.shards:
                shards.setdefault(d.name, set()).add(d.shards)
    out: list[dict[str, Any]] = []
    for m in masks:
        for k, d in enumerate(m.dims):
            n = binding[d.name]
            for parts, text in sorted(_partitions(d.name, n, shards.get(d.name, set()), binding,
                                                  first=k == 0 and len(m.dims) > 1),
                                      key=lambda x: -x[0]):
                out.append({"kind": "zero-block", "input": m.attrs[0], "dim": d.name,
                            "parts": parts, "block": 1,
                            "text": f"{text} ({m.attrs[0]} is 0 there; it keeps a 1 elsewhere)"})
    for x, d in _selection_biases(roots):
        if binding[d] >= 2:
            out.append({"kind": "exclude", "input": x, "dim": d, "index": 1,
                        "text": f"expert {d}=1 receives no tokens ({x}[{d}=1] = -1e6: never in the "
                                f"top-k)"})
    return out[:EDGE_DRAWS_MAX]


def _partitions(dim: str, n: int, specs: Iterable[tuple[str, ...]], binding: Binding,
                first: bool) -> set[tuple[int, str]]:
    """``(parts, what block 1 is)`` for the partitions of a dim of size ``n``."""
    out: dict[int, str] = {}
    if n >= 2:
        out[n] = "sequence 1 is fully padded" if first else f"{dim} index 1 is fully padded"
    for spec in sorted(specs):
        sizes: list[tuple[str, int]] = []
        for a in spec:
            k = int(a.split("/")[1]) if a.startswith("#") else binding.get(a, 1)
            sizes.append((a, k))
            parts = 1
            for _, s in sizes:
                parts *= s
            if 2 <= parts <= n and n % parts == 0:
                out[parts] = _block_text(dim, sizes, first)
    return set(out.items())


def _block_text(dim: str, sizes: list[tuple[str, int]], first: bool) -> str:
    """What block 1 of the nested partition ``sizes`` (outermost first) is, in mesh terms."""
    coords: list[int] = []
    rest = 1
    for _, s in reversed(sizes):          # block 1 in mixed radix, innermost fastest
        coords.append((1 // rest) % s)
        rest *= s
    coords.reverse()
    named = [(a, c) for (a, _), c in zip(sizes, coords)]
    last, c = named[-1]
    whose = ", ".join(f"{a}={c}" for a, c in named[:-1] if not a.startswith("#"))
    of = "the batch" if first else f"dim {dim}"
    if last.startswith("#"):
        return f"chunk {c} of {last.split('/')[1]} along {dim} is fully padded"
    if last == "mb":
        return f"micro-batch {c}" + (f" of rank ({whose})" if whose else "") + " is fully padded"
    return f"the share of rank {whose + ', ' if whose else ''}{last}={c} in {of} is fully padded"


def _selection_biases(roots: Sequence[Term]) -> list[tuple[str, str]]:
    """``(input, dim)``: real inputs reached only through a ``TOPK_MASK``'s score operand and
    carrying its dim."""
    outside: set[int] = set()
    stack = list(roots)
    while stack:                          # everything reachable without entering a TOPK score
        t = stack.pop()
        if id(t) in outside:
            continue
        outside.add(id(t))
        stack.extend(t.args[1:] if t.op is Op.TOPK_MASK else t.args)
    out: list[tuple[str, str]] = []
    for t in walk(list(roots)):
        if t.op is not Op.TOPK_MASK:
            continue
        for x in walk([t.args[0]]):
            if x.op is Op.INPUT and x.attrs[2] == "real" and id(x) not in outside \
                    and t.attrs[0] in x.dim_names and (x.attrs[0], t.attrs[0]) not in out:
                out.append((str(x.attrs[0]), str(t.attrs[0])))
    return out
