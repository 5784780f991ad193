"""Randomness as explicit RNG streams: dropout masks whose draws are named by (stream, offset).

Model (CASES.md section 8, Megatron-LM #1256). Every random draw is a symbol named by
``(stream, offset)``. A stream is a counter-based generator (Philox): :class:`RngStream`
``(seed, fork)`` is the stream ``(seed, coordinates of the rank on the fork axes)``; every
dropout call takes the next ``numel`` offsets of its stream, local index ``l`` (row-major over
the local tensor's dims) at offset ``start + l``; inside a micro-batch loop micro-batch ``m``
starts ``m * (offsets one forward takes)`` further on.

* **Spec.** ``dropout(x, p, name=n)`` draws one fresh symbol per global position:
  ``x * M_n * 1/(1-p)`` with ``M_n = INPUT("dropout:n|p=p", "data", "mask")`` over ``x``'s dims,
  entries i.i.d. Bernoulli(1-p). The spec's ``rng`` argument is informational (the spec's
  meaning is one fresh draw per position).
* **Plan.** ``dropout(x_local, p, rng=RngStream(...), name=n)``. Since every draw is i.i.d.
  Bernoulli(1-p), the plan's draws may be *renamed* to the spec's symbols by any injective map
  that keeps ``p``: the plan's local mask is then the lineage of ``M_n`` through ``x``'s type
  (``SHARD(M_n, d, a)`` per shard, outermost first). The renaming exists only if
  ``position -> (stream, offset)`` is injective (no two positions share a draw) and consistent
  (every rank holding one position draws the same symbol); where it is not, the term says so:

  - a shard axis ``a`` of ``x`` that the stream does not fork on: every coordinate of ``a``
    draws the same offsets of the same stream, so the rank's mask is the one of coordinate 0:
    ``BROADCAST(mask, a, 0)`` (B35: rows ``i`` and ``i + S/tp`` share draws);
  - a mesh axis the stream forks on (or ``mb``) that does not shard ``x``: the ranks holding one
    position draw different symbols: coordinate 0 keeps ``M_n``, coordinate ``c`` uses a fresh
    ``M_n@a=c`` (selected by ``RANK_CONST``);
  - two distinct :class:`RngStream` objects with the same ``(seed, fork)`` (a re-seeded
    generator) reuse each other's draws: a call taking exactly the offsets of an earlier call of
    the same local type and the same ``p`` reuses that call's mask symbols (other overlaps are
    left to :mod:`proofs.rng`, which then finds the terms are not a renaming: UNKNOWN).

  A different ``p`` is a different symbol (``M_n`` names ``p``), so a plan with the wrong keep
  probability differs from the spec. The independent check :mod:`proofs.rng` enumerates the
  true ``position -> (stream, offset)`` map and verifies that these terms are a renaming of it
  (else the verdict is UNKNOWN) and names two colliding positions.

**Pipeline stages** (:class:`~spec_lang.pipeline.Pipeline`). Each stage process has its own
generator: a call traced inside physical stage ``s`` runs only on coordinate ``s`` of the
pipeline axis, and its offsets are counted per ``(stage, stream object)`` from 0, advancing
per forward of the stage (micro-batch ``m`` starts ``m`` stage-forwards on). A stream not
forked on pp therefore gives two stages' calls the *same* offsets (their masks coincide: a
call of the same type and ``p`` reuses the other stage's symbols); Megatron seeds
``seed + 100 * pp_rank`` (a stream forked on ``pp``), which draws another stream per stage.
The stage's mask does not vary over the pipeline axis. Modelled for one model chunk per stage
with every stage's forwards in micro-batch order (GPipe, 1F1B).

Limits: a dropout over a chunked dim (``HD[#0/2]``) is a PlanError (not modelled). Not
modelled, so every goal is UNKNOWN (the record carries the reason, :mod:`proofs.rng` reports it):

* dropout inside pipeline stages of an interleaved schedule (several model chunks per stage) or
  of a schedule whose forwards on a stage are not in micro-batch order; dropout outside a
  ``Pipeline`` stage on a mesh with ``pp > 1``;
* a stream object created inside the traced forward of a plan with micro-batches: in reality it
  is re-seeded for every micro-batch (each restarts at offset 0); the trace runs once.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spec_lang.tensor import Tensor, current_trace, fail, record_site, user_site
from spec_lang.term import DimSpec, Op, Term, term

__all__ = ["RngStream", "model_parallel_rng", "dropout", "DropoutRecord", "collect",
           "MAX_REPLICA_COORDS", "StageInfo", "in_stage"]

MAX_REPLICA_COORDS = 64  # coordinates of forked replica axes modelled with fresh symbols


class RngStream:
    """A counter-based generator: stream ``(seed, rank coordinates on fork)``, offsets from 0.

    Equality is identity: two ``RngStream(1234)`` objects are two generators seeded alike (they
    draw the same offsets: a re-seeded generator). Create one per generator, at module level.

    Args:
        seed: the integer seed.
        fork: mesh axes whose coordinate is part of the stream (Megatron's model-parallel RNG
            tracker forks on ``tp``: stream ``(seed, tp_rank)``). ``mb`` is not a mesh axis:
            micro-batches advance the offset instead.
        label: a name for reports (default ``"seed <seed>"``).
    """

    def __init__(self, seed: int, fork: tuple[str, ...] | list[str] | str = (), label: str = ""):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise fail(f"RngStream(seed={seed!r}): the seed is an integer")
        if isinstance(fork, str):
            fork = (fork,)
        self.seed = seed
        self.fork = tuple(str(a) for a in fork)
        if "mb" in self.fork:
            raise fail("RngStream(fork=('mb',)): micro-batches advance the offset; fork on mesh "
                       "axes only")
        self.label = label or (f"seed {seed}" + (f" forked on {','.join(self.fork)}"
                                                 if self.fork else ""))
        self.site = user_site(2)
        # created while a trace runs (inside the traced forward): re-created per micro-batch
        self.in_trace = current_trace() is not None

    def __repr__(self) -> str:
        return f"RngStream({self.seed}, fork={self.fork})"


def model_parallel_rng(seed: int, axis: str = "tp") -> RngStream:
    """Megatron's model-parallel RNG tracker: stream ``(seed + 2718, tp_rank)``
    (``megatron/core/tensor_parallel/random.py``, ``model_parallel_cuda_manual_seed``)."""
    return RngStream(seed + 2718, fork=(str(axis),), label=f"model-parallel (seed {seed}+2718, "
                     f"{axis} rank)")


@dataclass
class DropoutRecord:
    """One dropout call of a trace (what :mod:`proofs.rng` re-checks).

    Attributes:
        side: ``"spec"`` or ``"plan"``.
        name: the dropout's name (spec and plan calls pair by name).
        p: drop probability (exact).
        dims: the local type of ``x`` (dims with their shards, outermost first).
        stream: the :class:`RngStream` (``None`` in a spec without one).
        stream_index: per-trace number of the stream object (0, 1, ...).
        order: position of the call among the calls on its stream object in one forward.
        spec_input: the spec's mask ``INPUT`` (global dims).
        mask: the mask term the plan multiplies by (the renaming; the spec's is ``spec_input``).
        site: ``file:line`` of the call.
        unmodelled: why the true draws of this call are not modelled (``""`` when they are;
            otherwise :mod:`proofs.rng` leaves every goal UNKNOWN with this note).
        stage: the physical pipeline stage whose process runs the call (``None`` outside a
            :class:`~spec_lang.pipeline.Pipeline`): the call runs only on that coordinate of
            ``stage_axis``, with that process's own generator (offsets from 0).
        stage_axis: the pipeline's mesh axis (``"pp"``) when ``stage`` is set.
    """

    side: str
    name: str
    p: Fraction
    dims: tuple[DimSpec, ...]
    stream: RngStream | None
    stream_index: int
    order: int
    spec_input: Term
    mask: Term
    site: str
    unmodelled: str = ""
    stage: int | None = None
    stage_axis: str = ""


PIPELINE_NOTE = "dropout inside pipeline stages is not modelled"
MICROBATCH_NOTE = ("an RngStream created inside the traced forward is re-seeded for every "
                   "micro-batch (each restarts at offset 0); this is not modelled")


@dataclass(frozen=True)
class StageInfo:
    """The pipeline stage a dropout call is traced in (pushed by :mod:`spec_lang.pipeline`).

    Attributes:
        stage: physical stage ``s`` (the ``axis`` coordinate whose process runs the call).
        axis: the pipeline's mesh axis.
        why: ``""`` when per-stage generators are modelled (one model chunk per stage, every
            stage's forwards in micro-batch order), else why not.
    """

    stage: int
    axis: str
    why: str = ""


_IN_STAGE: list[StageInfo] = []  # stages being traced (spec_lang.pipeline pushes/pops)


@contextlib.contextmanager
def in_stage(info: StageInfo) -> Iterator[None]:
    """Mark the dropout calls traced inside a pipeline stage (per-stage generators)."""
    _IN_STAGE.append(info)
    try:
        yield
    finally:
        _IN_STAGE.pop()


@dataclass
class _TraceState:
    records: list[DropoutRecord] = field(default_factory=list)
    streams: dict[int, int] = field(default_factory=dict)        # id(stream) -> index
    objs: list[RngStream] = field(default_factory=list)          # keep them alive
    used: dict[Any, list[tuple[DimSpec, ...]]] = field(default_factory=dict)  # (stage, idx)
    masks: dict[tuple, Term] = field(default_factory=dict)      # (key, prior types, type) -> mask
    names: set[str] = field(default_factory=set)


_COLLECT: list[list[DropoutRecord]] = []
_STATE: dict[int, _TraceState] = {}


@contextlib.contextmanager
def collect() -> Iterator[list[DropoutRecord]]:
    """Collect the :class:`DropoutRecord` s of every trace run inside (``build_problem``)."""
    out: list[DropoutRecord] = []
    _COLLECT.append(out)
    try:
        yield out
    finally:
        _COLLECT.pop()


def _state() -> _TraceState:
    ctx = current_trace()
    if ctx is None:
        raise fail("dropout outside a spec or plan trace")
    st = getattr(ctx, "_rng_state", None)
    if st is None:
        st = _TraceState()
        object.__setattr__(ctx, "_rng_state", st)
    return st


def _prob(p: Any) -> Fraction:
    from spec_lang.ops import exact

    v = exact(p, what="dropout probability")
    if not isinstance(v, Fraction) and not (hasattr(v, "is_Rational") and v.is_Rational):
        raise fail(f"dropout p={p!r}: give an exact rational (Fraction(1, 10) or 0.1)")
    v = Fraction(str(v)) if not isinstance(v, Fraction) else v
    if not 0 < v < 1:
        raise fail(f"dropout p={p}: need 0 < p < 1 (p is the drop probability)")
    return v


def _input(name: str, dims: tuple[DimSpec, ...]) -> Term:
    # dims sorted by name: the spec's and the plan's calls name one INPUT node
    return term(Op.INPUT, (), (name, "data", "mask"),
                tuple(DimSpec(n) for n in sorted(d.name for d in dims)))


def _nest(m: Term, dims: tuple[DimSpec, ...]) -> Term:
    """``m`` (global dims) through the shards of ``dims``: ``SHARD(m, d, a)`` outermost first."""
    cur = {d.name: DimSpec(d.name) for d in m.dims}
    for d in dims:
        for a in d.shards:
            cur[d.name] = DimSpec(d.name, cur[d.name].shards + (a,))
            m = term(Op.SHARD, (m,), (d.name, a), tuple(cur[x.name] for x in m.dims))
    return m


def dropout(x: Tensor, p: Any, rng: RngStream | None = None, *, name: str | None = None
            ) -> Tensor:
    """Inverted dropout ``x * mask / (1 - p)``, mask i.i.d. Bernoulli(1 - p) per position.

    Args:
        x: the activation, any dims (a plan's local tensor: its type says which global positions
            the rank holds).
        p: the drop probability, exact (``Fraction(1, 10)`` or ``0.1``), ``0 < p < 1``.
        rng: the stream the draws come from (required in a plan; see :class:`RngStream`).
        name: pairs a plan call with the spec's (default ``dropout<k>``, the k-th call of the
            trace).

    Returns:
        a tensor with ``x``'s dims.

    Raises:
        SpecError / PlanError: bad ``p``, a plan call without ``rng``, a repeated name, a chunked
            dim, a fork axis not in the mesh.
    """
    from spec_lang.ops import _t, const, mul

    x = _t(x)
    pv = _prob(p)
    st = _state()
    ctx = current_trace()
    site = user_site(2)
    unmodelled = ""
    n = name if name is not None else f"dropout{len(st.records)}"
    if n in st.names:
        raise fail(f"dropout name {n!r} is used twice in this trace; give each call its own name")
    st.names.add(n)
    dims = x.term.dims
    for d in dims:
        if any(a.startswith("#") for a in d.shards):
            raise fail(f"dropout over {x.describe()}: a chunked dim ({d}) is not modelled; apply "
                       "dropout before chunking")
    m_name = f"dropout:{n}|p={pv}"
    spec_input = _input(m_name, dims)
    if ctx.kind == "spec" or rng is None:
        if ctx.kind == "plan":
            raise fail(f"dropout {n!r} in a plan needs rng=RngStream(...): which stream each rank "
                       "draws from is what the verifier checks")
        mask, idx, order = spec_input, -1, 0
    else:
        if not isinstance(rng, RngStream):
            raise fail(f"dropout rng={rng!r}: give an RngStream")
        mesh = dict(ctx.mesh)
        for a in rng.fork:
            if a not in mesh:
                raise fail(f"dropout {n!r}: stream forks on axis {a!r}, which is not in the mesh "
                           f"{mesh}")
        idx = st.streams.setdefault(id(rng), len(st.streams))
        if idx == len(st.objs):
            st.objs.append(rng)
        info = _IN_STAGE[-1] if _IN_STAGE else None
        # a stage process has its own generator: offsets are counted per (stage, stream)
        ukey = (info.stage, idx) if info is not None else idx
        prior = tuple(st.used.setdefault(ukey, []))
        order = len(prior)
        if info is not None and info.why:
            unmodelled = f"{PIPELINE_NOTE}: {info.why} (dropout {n!r} at {site})"
        elif info is None and mesh.get("pp", 1) > 1:
            unmodelled = (f"{PIPELINE_NOTE} (dropout {n!r} at {site} outside a Pipeline stage "
                          "on a mesh with pp > 1)")
        elif rng.in_trace and mesh.get("mb", 1) > 1:
            unmodelled = f"{MICROBATCH_NOTE} (dropout {n!r} at {site}, stream {rng.label})"
        # the stage's code runs only on its own coordinate of the pipeline axis: the mask does
        # not vary over it; a stream forked on it is another stream per stage
        forked_stage = info.stage if info is not None and info.axis in rng.fork else None
        local_mesh = {a: k for a, k in mesh.items() if info is None or a != info.axis}
        key = (rng.seed, rng.fork, forked_stage, prior, dims, pv)  # same draws, same p
        mask = st.masks.get(key)
        if unmodelled:
            # the goals stay UNKNOWN (proofs.rng); a placeholder that does not vary over pp/mb
            mask = _nest(spec_input, dims)
        elif mask is None:
            mask = _plan_mask(spec_input, dims, rng, local_mesh, m_name)
            st.masks[key] = mask
        st.used[ukey].append(dims)
    info = _IN_STAGE[-1] if _IN_STAGE and ctx.kind == "plan" and rng is not None else None
    rec = DropoutRecord(ctx.kind, n, pv, dims, rng, idx, order, spec_input, mask, site,
                        unmodelled, info.stage if info is not None else None,
                        info.axis if info is not None else "")
    st.records.append(rec)
    for out in _COLLECT:
        out.append(rec)
    record_site(mask, site)
    return mul(mul(x, Tensor(mask, site)), const(1 / (1 - pv)))


def _plan_mask(m: Term, dims: tuple[DimSpec, ...], rng: RngStream, mesh: dict[str, int],
               m_name: str) -> Term:
    """The plan's mask for local type ``dims``: the spec symbol ``m`` through the shards, with
    ``BROADCAST`` over shard axes the stream does not fork on and fresh symbols per coordinate
    of fork axes (and ``mb``) that do not shard the activation (module docstring)."""
    shard_axes = [a for d in dims for a in d.shards]
    mask = _nest(m, dims)
    # a shard axis the stream does not fork on: every coordinate draws coordinate 0's symbols
    for a in shard_axes:
        if a != "mb" and a not in rng.fork and mesh.get(a, 1) > 1:
            mask = term(Op.BROADCAST, (mask,), (a, 0), mask.dims)
    # forked axes (and mb) that do not shard x: the replicas of one position draw differently
    rep = [a for a in mesh if mesh[a] > 1 and a not in shard_axes
           and (a in rng.fork or a == "mb")]
    if not rep:
        return mask
    coords = list(itertools.product(*(range(mesh[a]) for a in rep)))
    if len(coords) > MAX_REPLICA_COORDS:
        raise fail(f"dropout: the stream {rng.label} forks on {rep}, which do not shard the "
                   f"activation; {len(coords)} replica coordinates is more than the "
                   f"{MAX_REPLICA_COORDS} modelled")
    total: Term | None = None
    for c in coords:
        sym = m if not any(c) else _input(
            m_name + "@" + ",".join(f"{a}={i}" for a, i in zip(rep, c)), m.dims)
        part = _nest(sym, dims)
        for a in shard_axes:
            if a != "mb" and a not in rng.fork and mesh.get(a, 1) > 1:
                part = term(Op.BROADCAST, (part,), (a, 0), part.dims)
        sel: list[Term] = []
        for a, i in zip(rep, c):
            vals = tuple(Fraction(int(j == i)) for j in range(mesh[a]))
            sel.append(term(Op.RANK_CONST, (), (a, vals), ()))
        prod = term(Op.MUL, (*sel, part), (), part.dims)
        total = prod if total is None else term(Op.ADD, (total, prod), (), part.dims)
    assert total is not None
    return total
