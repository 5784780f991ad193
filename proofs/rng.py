"""The RNG obligation: dropout draws, position -> (stream, offset), injective and modelled.

CASES.md section 8 (B35, Megatron-LM #1256). A plan's dropout mask equals the spec's *in
distribution* iff the map from global element position to the draw ``(stream, offset)`` that
produces it is

* **consistent**: every rank that holds one position draws the same ``(stream, offset)``;
* **injective**: two distinct positions never share a draw;
* **distribution-preserving**: the plan's keep probability ``1 - p`` (and hence the scaling
  ``1/(1-p)``) equals the spec's for the same dropout.

Then the plan's draws can be renamed to the spec's mask symbols. :mod:`spec_lang.rng` builds the
plan's mask terms as such a renaming (with ``BROADCAST`` / fresh symbols where draws collide or
replicas diverge). :func:`check_rng` recomputes the *true* map exhaustively from the stream
description of every call (seed, fork axes, offsets taken in call order, micro-batches advancing
the offset) at a binding, and verifies that the mask terms are a renaming of it: evaluated with
each symbol replaced by a unique id, the term's id and the true draw determine each other
(one id per draw and one draw per id). A mask term that is not such a renaming makes the goals
UNKNOWN (the terms would not be a sound model); a collision is reported with the two global
positions that share a draw.

Pipeline stages: a call with ``stage = s`` runs only on coordinate ``s`` of its pipeline axis,
and offsets are counted per ``(stage, stream object)`` from 0 (each stage process has its own
generator), so two stages on one stream not forked on pp share draws. Not modelled
(``modelled`` False, the goals UNKNOWN): calls whose record carries ``unmodelled`` (interleaved
schedules, a stream re-created per micro-batch, see :mod:`spec_lang.rng`) and a call outside a
pipeline stage on a mesh with ``pp > 1``.

Cost: one entry per (rank, local element, dropout call); the prover runs it at the reduced sizes
(real mesh sizes) and, when at most :data:`EXHAUSTIVE_BUDGET` entries, at the real sizes too.
When even the real mesh is over the budget, :func:`check_rng_reduced_mesh` enumerates the same
calls on a reduced mesh (every axis cut to a few coordinates, pipeline axes kept; see
``docs/rank-symmetry.md``), and the assumption records those sizes.
Why the reduced sizes suffice for the term model: the model's symbol choice depends only on which
axes shard the activation and which the stream forks on (size-free), and on whole-call offset
reuse; partially overlapping offset ranges of re-seeded streams are size-dependent, and are only
checked at the sizes enumerated (recorded in the assumption).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spec_lang.evaluate import evaluate, rank_axis
from spec_lang.term import Binding, DimSpec, Op, walk

__all__ = ["RngCheck", "check_rng", "check_rng_reduced_mesh", "EXHAUSTIVE_BUDGET"]

EXHAUSTIVE_BUDGET = 2_000_000  # (rank, element) pairs enumerated per check


@dataclass
class RngCheck:
    """Result of :func:`check_rng` at one binding.

    Attributes:
        collisions: human-readable findings (two positions sharing a draw; replicas drawing
            differently; a keep probability that differs from the spec's), first ones only.
        modelled: the plan's mask terms are a renaming of the true draws (else the proof of the
            goals is not valid: UNKNOWN).
        why: the reason when not modelled (or not checked).
        checked: False when the enumeration exceeded the budget (nothing was checked).
        sizes: the binding enumerated.
    """

    collisions: list[str] = field(default_factory=list)
    modelled: bool = True
    why: str = ""
    checked: bool = True
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.checked and self.modelled and not self.collisions


def _global_sizes(dims: Sequence[DimSpec], b: Binding) -> list[int]:
    return [b[d.name] for d in dims]


def _fmt_pos(name: str, dims: Sequence[DimSpec], idx: Sequence[int]) -> str:
    return f"dropout {name!r} position (" + ", ".join(
        f"{d.name}={i}" for d, i in zip(dims, idx)) + ")"


def _fmt_draw(stream: Any, coords: Mapping[str, int], off: int) -> str:
    fork = ", ".join(f"{a}={coords[a]}" for a in stream.fork)
    return f"stream (seed {stream.seed}{', ' + fork if fork else ''}) offset {off}"


def check_rng(records: Sequence[Any], binding: Binding, mesh: Mapping[str, int], *,
              budget: int = EXHAUSTIVE_BUDGET, max_reports: int = 3) -> RngCheck:
    """Enumerate position -> (stream, offset) for every plan dropout call at ``binding``.

    Args:
        records: :class:`spec_lang.rng.DropoutRecord` s of both traces (``Problem.rng``).
        binding: dim and axis sizes (the mesh sizes must be the plan's).
        mesh: axis -> size, in mesh order, ``mb`` included when micro-batching.
        budget: most (rank, element) pairs enumerated; above it ``checked`` is False.

    Returns:
        an :class:`RngCheck`.
    """
    res = RngCheck(sizes=dict(binding))
    spec = {r.name: r for r in records if r.side == "spec"}
    plan = [r for r in records if r.side == "plan"]
    if not plan:
        return res
    # calls whose true draws are not modelled (spec_lang.rng: pipeline stages, a stream re-created
    # per micro-batch); a renaming cannot be checked: the goals stay open
    why = [r.unmodelled for r in plan if getattr(r, "unmodelled", "")]
    if int(mesh.get("pp", 1)) > 1 and not why and any(
            getattr(r, "stage", None) is None for r in plan):
        why = ["dropout inside pipeline stages is not modelled (a call outside a Pipeline "
               "stage on a mesh with pp > 1)"]
    # one seed under two fork sets: frameworks derive a forked stream's seed as seed + c * rank
    # (Megatron: 100 * pp_rank, 2718 + tp_rank), so rank 0 of the fork may reuse the unforked
    # stream; whether the two collide depends on the framework's derivation: not decided
    forks: dict[int, set[tuple[str, ...]]] = {}
    for r in plan:
        if getattr(r, "stream", None) is not None:
            forks.setdefault(r.stream.seed, set()).add(tuple(r.stream.fork))
    mixed = sorted(seed for seed, fs in forks.items() if len(fs) > 1)
    if not why and mixed:
        fs = " and ".join("(" + ",".join(f) + ")" for f in sorted(forks[mixed[0]]))
        why = [f"streams with seed {mixed[0]} are forked on {fs}: a forked stream's seed is "
               "derived from the base seed per rank (Megatron adds 100 * pp_rank), so rank 0 may "
               "reuse the unforked stream's draws; give the streams distinct seeds"]
    if why:
        res.modelled, res.why = False, why[0]
        return res
    axes = list(mesh)
    sizes = [int(mesh[a]) for a in axes]
    coords = list(itertools.product(*(range(n) for n in sizes)))
    # a call inside pipeline stage s runs only on coordinate s of the pipeline axis
    cidx = {id(r): _stage_coords(r, axes, coords) for r in plan}
    local_n = {id(r): int(np.prod([binding.local_size(d) for d in r.dims], dtype=np.int64))
               for r in plan}
    total = sum(local_n[id(r)] * len(cidx[id(r)]) for r in plan)
    if total > budget:
        res.checked, res.why = False, (f"{total} (rank, element) pairs exceed the budget "
                                       f"{budget}")
        return res
    # distribution: same name, same p, same global dims as the spec's call
    for r in plan:
        s = spec.get(r.name)
        if s is None:
            res.collisions.append(f"dropout {r.name!r} ({r.site}) has no spec dropout of that "
                                  "name: the plan draws a mask the spec does not")
        elif s.p != r.p:
            res.collisions.append(f"dropout {r.name!r}: plan p = {r.p} ({r.site}) but spec p = "
                                  f"{s.p} ({s.site}): keep probability and 1/(1-p) scaling differ")
        elif sorted(d.name for d in s.dims) != sorted(d.name for d in r.dims):
            res.collisions.append(f"dropout {r.name!r}: plan dims {[d.name for d in r.dims]} vs "
                                  f"spec dims {[d.name for d in s.dims]}")
    # offsets: calls on one stream object take consecutive ranges; micro-batch m is m forwards on.
    # Each pipeline stage process has its own generator: counters per (stage, stream object)
    per_fwd: dict[tuple, int] = {}
    start: dict[int, int] = {}
    gen = {id(r): (getattr(r, "stage", None), r.stream_index) for r in plan}
    for r in plan:
        start[id(r)] = per_fwd.get(gen[id(r)], 0)
        per_fwd[gen[id(r)]] = start[id(r)] + local_n[id(r)]
    names = sorted({r.name for r in plan})
    base, acc = {}, 0
    for n in names:
        r0 = next(r for r in plan if r.name == n)
        base[n] = acc
        acc += int(np.prod(_global_sizes(r0.dims, binding), dtype=np.int64))
    keys: dict[tuple, int] = {}
    pos_l, key_l, off_l, who_l = [], [], [], []
    for k, r in enumerate(plan):
        loc = [binding.local_size(d) for d in r.dims]
        glob = _global_sizes(r.dims, binding)
        grids = np.indices(loc).reshape(len(loc), -1) if loc else np.zeros((0, 1), np.int64)
        flat_local = np.arange(local_n[id(r)], dtype=np.int64)
        for ci in cidx[id(r)]:
            c = coords[ci]
            rc = dict(zip(axes, c))
            gidx = []
            for j, d in enumerate(r.dims):
                off, n = 0, glob[j]
                for a in d.shards:
                    n //= int(mesh[a])
                    off += rc[a] * n
                gidx.append(grids[j] + off)
            gflat = np.ravel_multi_index(gidx, glob) if glob else np.zeros(1, np.int64)
            kk = (r.stream.seed, tuple(rc[a] for a in r.stream.fork))
            kid = keys.setdefault(kk, len(keys))
            m = rc.get("mb", 0)
            pos_l.append(base[r.name] + gflat)
            key_l.append(np.full(flat_local.shape, kid, np.int64))
            off_l.append(start[id(r)] + m * per_fwd[gen[id(r)]] + flat_local)
            who_l.append(np.stack([np.full(flat_local.shape, k), np.full(flat_local.shape, ci),
                                   flat_local]))
    pos, key, off = np.concatenate(pos_l), np.concatenate(key_l), np.concatenate(off_l)
    who = np.concatenate(who_l, axis=1)
    inv_keys = {v: k for k, v in keys.items()}

    def describe(i: int) -> tuple[str, str, str]:
        r = plan[int(who[0, i])]
        rc = dict(zip(axes, coords[int(who[1, i])]))
        flat = int(pos[i] - base[r.name])
        gi = np.unravel_index(flat, _global_sizes(r.dims, binding))
        seed, fc = inv_keys[int(key[i])]
        stream_coords = dict(zip(r.stream.fork, fc))
        return (_fmt_pos(r.name, r.dims, [int(x) for x in gi]),
                "rank (" + ", ".join(f"{a}={v}" for a, v in rc.items()) + ")",
                _fmt_draw(r.stream, stream_coords, int(off[i])))

    # consistency: one draw per position
    o = np.lexsort((off, key, pos))
    same_pos = pos[o][1:] == pos[o][:-1]
    diff = same_pos & ((key[o][1:] != key[o][:-1]) | (off[o][1:] != off[o][:-1]))
    for j in np.flatnonzero(diff)[:max_reports]:
        a, b = int(o[j]), int(o[j + 1])
        pa, ra, da = describe(a)
        _, rb, db = describe(b)
        res.collisions.append(f"replicas differ: {pa} is drawn as {da} on {ra} but as {db} on "
                              f"{rb}")
    # injectivity: one position per draw
    o = np.lexsort((pos, off, key))
    same_draw = (key[o][1:] == key[o][:-1]) & (off[o][1:] == off[o][:-1])
    coll = same_draw & (pos[o][1:] != pos[o][:-1])
    for j in np.flatnonzero(coll)[:max_reports]:
        a, b = int(o[j]), int(o[j + 1])
        pa, ra, da = describe(a)
        pb, rb, _ = describe(b)
        res.collisions.append(f"{pa} (on {ra}) and {pb} (on {rb}) share one draw: {da}")
    # the mask terms are a renaming of the true draws
    res.modelled, res.why = _model_check(plan, binding, mesh, axes, sizes, key, off, cidx)
    return res


def _stage_coords(r: Any, axes: list[str], coords: list[tuple[int, ...]]) -> list[int]:
    """Indices of the rank coordinates that run call ``r`` (all, or one pipeline stage's)."""
    s = getattr(r, "stage", None)
    if s is None:
        return list(range(len(coords)))
    k = axes.index(r.stage_axis)
    return [i for i, c in enumerate(coords) if c[k] == s]


def _model_check(plan: Sequence[Any], binding: Binding, mesh: Mapping[str, int],
                 axes: list[str], sizes: list[int], key: np.ndarray, off: np.ndarray,
                 cidx: Mapping[int, list[int]]) -> tuple[bool, str]:
    masks = list({id(r.mask): r.mask for r in plan}.values())
    inputs: dict[str, np.ndarray] = {}
    nxt = 1
    for t in walk(masks):
        if t.op is Op.INPUT and t.attrs[0] not in inputs:
            shape = [binding[d.name] for d in t.dims]
            n = int(np.prod(shape, dtype=np.int64))
            inputs[t.attrs[0]] = (np.arange(n, dtype=np.float64) + nxt).reshape(shape)
            nxt += n
        elif t.op is Op.INPUT:
            continue
    vals = evaluate(masks, binding, inputs, keep="roots")
    sym_l = []
    for r in plan:
        v = vals[r.mask]
        want = tuple(rank_axis(a) for a in axes) + tuple(d.name for d in r.dims)
        arr = np.broadcast_to(v.transpose_to(want),
                              tuple(sizes) + tuple(binding.local_size(d) for d in r.dims))
        flat = arr.reshape(len(list(itertools.product(*(range(n) for n in sizes)))), -1)
        sym_l.append(flat[cidx[id(r)]])
    sym = np.concatenate([s.reshape(-1) for s in sym_l])
    if sym.shape != key.shape:
        return False, "internal: mask evaluation does not cover every draw"
    if not np.all(np.isfinite(sym)) or np.any(sym != np.round(sym)) or np.any(sym < 1):
        return False, "a mask term mixes symbols (not a renaming of the draws)"
    draw = key * (int(off.max()) + 1) + off
    for a, b in ((draw, sym), (sym, draw)):
        o = np.lexsort((b, a))
        bad = (a[o][1:] == a[o][:-1]) & (b[o][1:] != b[o][:-1])
        if bad.any():
            return False, ("the dropout mask terms are not a renaming of the plan's draws "
                           "(position -> (stream, offset) map not modelled, e.g. partially "
                           "overlapping offset ranges of re-seeded streams)")
    return True, ""


def check_rng_reduced_mesh(records: Sequence[Any], binding: Binding, mesh: Mapping[str, int], *,
                           budget: int = EXHAUSTIVE_BUDGET) -> RngCheck:
    """:func:`check_rng` on a reduced mesh: the plan's mask terms rewritten for the mesh of
    :func:`proofs.reduction.reduce_mesh` (pipeline stage axes keep their real size: a call's
    stage is a real coordinate). ``binding`` holds the real sizes. Why the reduced mesh decides
    the same questions: whether two positions share a draw, or two replicas of one position
    draw differently, depends on which axes shard the activation and which the stream forks on,
    not on their sizes (each reduced axis keeps >= 3 coordinates); the mask terms' renaming is
    checked on the reduced program itself. What depends on sizes (partially overlapping offset
    ranges) is checked only at the sizes enumerated, as for dims (``RngCheck.sizes``)."""
    import dataclasses

    from proofs.reduction import reduce_mesh

    plan = [r for r in records if r.side == "plan"]
    stage_axes = {r.stage_axis for r in plan if getattr(r, "stage", None) is not None}
    mr = reduce_mesh([r.mask for r in plan], binding, keep=stage_axes)
    if not mr.reduced:
        return check_rng(records, binding, mesh, budget=budget)
    new = dict(zip((id(r) for r in plan), mr.roots))
    recs = [dataclasses.replace(r, mask=new[id(r)]) if id(r) in new else r for r in records]
    small = {a: mr.mesh.get(a, n) for a, n in mesh.items()}
    return check_rng(recs, mr.binding, small, budget=budget)
