"""Pipeline schedules as plan data: an explicit event order per stage, and the gradient buffer.

A *schedule* is, for each pipeline stage, the list of events that stage runs, in order:

* ``F(m, c)``: forward of micro-batch ``m`` through the stage's model chunk ``c`` (virtual stage
  ``c * pp + s`` for interleaved 1F1B; ``c = 0`` otherwise);
* ``B(m, c)``: backward of micro-batch ``m`` through chunk ``c``: adds that micro-batch's
  gradient contribution ``g_m`` of the chunk's parameters to the stage's gradient buffer
  (``buf += g_m``);
* plan hooks on the gradient buffer (everything a framework does to it besides ``+=``):
  ``scale(c)`` (``buf = c * buf``: a schedule's own gradient scaling, an in-place division),
  ``reset()`` (``buf = 0``: ``zero_grad``, a stage re-initialisation setting ``.grad = None``)
  and ``collective(axis, op)`` (``buf = AR_op[axis](buf)``; with ``accumulate=True`` the result
  is added to the carried buffer: ``buf = buf + AR_op[axis](buf)``, the in-place path of
  Megatron-FSDP for 1-rank groups, Megatron-LM #6660) and ``reduce_scatter(axis, dim, op)``
  (FSDP: ``sharded += RS_op[axis, dim](buf); buf = 0``); both may name a communication ``dtype``.

The generators follow the published schedules: :func:`gpipe` (Huang et al. 2019, GPipe: all
forwards, then all backwards), :func:`one_f_one_b` (Narayanan et al. 2019, PipeDream-Flush /
Megatron-LM's ``forward_backward_pipelining_without_interleaving``: ``pp - s - 1`` warm-up
forwards, then one forward / one backward, then the cool-down backwards) and
:func:`interleaved_one_f_one_b` (Narayanan et al. 2021, "Efficient Large-Scale Language Model
Training on GPU Clusters", section 2.2; Megatron-LM's
``forward_backward_pipelining_with_interleaving``: ``v`` model chunks per stage).

**Buffer semantics** (:func:`buffer_after`). The gradient buffer of one parameter is loop-carried
state. Its value after any prefix of a stage's events is, exactly, a sum over *chains* of
collectives ``C`` (applied in order, innermost first) of ``C(sum_m c_m g_m)`` with exact
rational coefficients ``c_m``: ``B(m)`` adds 1 to ``c_m`` of the empty chain, ``scale(k)``
multiplies every coefficient by ``k``, ``reset`` zeroes them, and a collective maps the buffer
``X`` to ``AR(X)`` (every chain extended by that collective; the collectives are linear, so
``AR(sum) = sum AR``). A collective therefore reads exactly the contributions that are in the
buffer when it fires: a reduction that fires after only a prefix of the backwards leaves
``AR(prefix) + tail``. Nothing is summarised or assumed; the coefficients are the loop.
A reduce-scatter ends the chains it reads (chain op ``"rs_avg:<dim>"``); the optimizer then
reads only those (sharded) chains: contributions left in the unsharded buffer are lost.

:func:`validate` checks a schedule is executable: every stage runs ``F(m, c)`` and ``B(m, c)``
exactly once for every micro-batch and chunk, backward after forward, and the stages can run
their lists to the end with blocking point-to-point transfers (``F`` on virtual stage ``j``
waits for ``F`` on ``j - 1``; ``B`` on ``j`` waits for ``B`` on ``j + 1``): otherwise a
:class:`~spec_lang.errors.PlanError` naming the stage and the event that blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from spec_lang.errors import PlanError
from spec_lang.tensor import user_site

__all__ = [
    "Event", "Schedule", "Buffer", "F", "B", "scale", "reset", "collective", "reduce_scatter",
    "chain_text", "is_scatter", "parse_op",
    "gpipe", "one_f_one_b", "interleaved_one_f_one_b", "accumulation_steps",
    "arm_reduction_in_last_forward", "reduce_after_last_backward", "reset_on_length_change", "buffer_after",
    "final_buffer", "collective_reads", "validate", "SCHEDULES",
]

Chain = tuple[tuple[str, str], ...]          # ((axis, "sum" | "avg"), ...), innermost first


def is_scatter(op: str) -> bool:
    """A chain op that is a reduce-scatter (``"rs_sum:<dim>"`` / ``"rs_avg:<dim>"``)."""
    return op.startswith("rs_")


def parse_op(op: str) -> tuple[str, str | None, str | None]:
    """A chain op ``"avg"``, ``"sum/bf16"``, ``"rs_avg:F"``, ``"rs_sum:F/bf16"`` as
    ``(reduction, reduce-scatter dim or None, communication dtype or None)``."""
    body, _, dtype = op.partition("/")
    if is_scatter(body):
        red, dim = body[3:].split(":", 1)
        return red, dim, dtype or None
    return body, None, dtype or None


def chain_text(axis: str, op: str, inner: str) -> str:
    """One chain step as text: ``AR_avg[dp](inner)`` or ``RS_avg[dp, F](inner)`` (with
    `` in bf16`` for a communication dtype)."""
    red, dim, dtype = parse_op(op)
    what = f"RS_{red}[{axis}, {dim}]" if dim is not None else f"AR_{red}[{axis}]"
    return f"{what}({inner})" + (f" in {dtype}" if dtype else "")


def _chain_op(e: Any) -> str:
    base = f"rs_{e.op}:{e.dim}" if e.kind == "reduce_scatter" else e.op
    return base + (f"/{e.dtype}" if e.dtype else "")


@dataclass(frozen=True)
class Event:
    """One event of a stage's event order.

    Attributes:
        kind: ``"F"``, ``"B"``, ``"scale"``, ``"reset"`` or ``"collective"``.
        mb: the micro-batch index (``F``/``B``), 0-based over the whole accumulation window.
        chunk: the stage's model chunk (interleaved 1F1B), else 0.
        factor: ``scale``: the exact factor.
        axis, op: ``collective`` / ``reduce_scatter``: the mesh axis and ``"sum"`` or ``"avg"``.
        accumulate: ``collective``: ``buf = buf + AR(buf)`` instead of ``buf = AR(buf)``.
        dim: ``reduce_scatter``: the dim the result is sharded along.
        dtype: the collective's communication dtype (None: the buffer's), for the precision
            lint.
        note: why the hook is there (shown in reports).
        site: the plan line that created the event.
    """

    kind: str
    mb: int | None = None
    chunk: int = 0
    factor: Fraction | None = None
    axis: str | None = None
    op: str | None = None
    accumulate: bool = False
    dim: str | None = None
    dtype: str | None = None
    note: str = ""
    site: str = field(default="", compare=False)

    def __str__(self) -> str:
        match self.kind:
            case "F" | "B":
                return f"{self.kind}{self.mb}" + (f".{self.chunk}" if self.chunk else "")
            case "scale":
                return f"scale({self.factor})"
            case "reset":
                return "reset"
            case "collective":
                return (f"{'buf+=' if self.accumulate else ''}AR_{self.op}[{self.axis}]")
            case "reduce_scatter":
                return f"RS_{self.op}[{self.axis}, {self.dim}]"
        return self.kind


def _exact(x: Any, site: str) -> Fraction:
    if isinstance(x, bool) or not isinstance(x, (int, Fraction)):
        raise PlanError(f"{site}: a buffer scale factor is an exact int or Fraction, got {x!r}")
    return Fraction(x)


def F(m: int, chunk: int = 0) -> Event:  # noqa: N802 -- the field's notation
    """Forward of micro-batch ``m`` (0-based) through model chunk ``chunk``."""
    return Event("F", m, chunk, site=user_site(2))


def B(m: int, chunk: int = 0) -> Event:  # noqa: N802
    """Backward of micro-batch ``m``: ``buf += g_m`` for the chunk's parameters."""
    return Event("B", m, chunk, site=user_site(2))


def scale(factor: int | Fraction, note: str = "") -> Event:
    """``buf = factor * buf`` (in place, everything accumulated so far)."""
    site = user_site(2)
    return Event("scale", factor=_exact(factor, site), note=note, site=site)


def reset(note: str = "") -> Event:
    """``buf = 0`` (``zero_grad``; a re-initialisation that sets gradients to None)."""
    return Event("reset", note=note, site=user_site(2))


def _dtype(dtype: Any, site: str, what: str = "dtype") -> str | None:
    """``dtype`` if it is None or a known floating dtype (PlanError naming ``site``)."""
    from spec_lang.ops import FLOAT_DTYPES
    if dtype is not None and (not isinstance(dtype, str) or dtype.lower().removeprefix(
            "torch.") not in FLOAT_DTYPES):
        raise PlanError(f"{site}: {what}={dtype!r} is not a known floating dtype; valid: "
                        f"{', '.join(FLOAT_DTYPES)}")
    return dtype


def collective(axis: Any, op: str = "avg", *, accumulate: bool = False, dtype: Any = None,
               note: str = "") -> Event:
    """A reduction of the buffer over mesh ``axis``: ``buf = AR_op(buf)`` (or, with
    ``accumulate``, ``buf = buf + AR_op(buf)``). ``op`` is ``"sum"`` or ``"avg"``; ``dtype``
    the communication dtype (``"bf16"``: a precision-lint finding; identity over the reals).

    Raises:
        PlanError: another ``op`` (the buffer semantics needs a linear reduction); an unknown
            dtype.
    """
    site = user_site(2)
    if op not in ("sum", "avg"):
        raise PlanError(f"{site}: a gradient-buffer collective is a sum or avg all-reduce, "
                        f"got {op!r}")
    return Event("collective", axis=str(axis), op=op, accumulate=accumulate,
                 dtype=_dtype(dtype, site), note=note, site=site)


def reduce_scatter(axis: Any, dim: Any, op: str = "avg", *, dtype: Any = None,
                   note: str = "") -> Event:
    """FSDP's gradient reduce-scatter as an event: ``sharded += RS_op[axis](buf)`` along ``dim``
    (block ``r`` of the sum, times ``1/|axis|`` for ``"avg"``), then ``buf = 0``. FSDP2 runs one
    after each micro-batch's backward, or one after the last (``no_sync``).

    Raises:
        PlanError: ``op`` not ``"sum"`` / ``"avg"``; an unknown dtype.
    """
    from spec_lang.dims import dim_name
    site = user_site(2)
    if op not in ("sum", "avg"):
        raise PlanError(f"{site}: a gradient reduce-scatter is a sum or avg, got {op!r}")
    return Event("reduce_scatter", axis=str(axis), op=op, dim=dim_name(dim),
                 dtype=_dtype(dtype, site), note=note, site=site)


@dataclass(frozen=True)
class Schedule:
    """The event order of every pipeline stage (plan data).

    Attributes:
        name: e.g. ``"1F1B"``.
        stages: ``stages[s]`` is stage ``s``'s event tuple.
        microbatches: M, the number of micro-batches in the window (``mb`` has size M).
        chunks: model chunks per stage (``v``; 1 unless interleaved).
    """

    name: str
    stages: tuple[tuple[Event, ...], ...]
    microbatches: int
    chunks: int = 1

    @property
    def pp(self) -> int:
        return len(self.stages)

    def with_stage(self, s: int, events: Iterable[Event], name: str | None = None) -> Schedule:
        """This schedule with stage ``s``'s events replaced."""
        st = list(self.stages)
        st[s] = tuple(events)
        return replace(self, stages=tuple(st), name=name or f"{self.name} (stage {s} edited)")

    def map_stages(self, f: Callable[[int, tuple[Event, ...]], Iterable[Event]],
                   name: str | None = None) -> Schedule:
        """Apply ``f(s, events) -> events`` to every stage."""
        return replace(self, stages=tuple(tuple(f(s, ev)) for s, ev in enumerate(self.stages)),
                       name=name or self.name)

    def describe(self) -> str:
        """One line per stage: ``stage 0: F0 F1 B0 AR_avg[dp] B1``."""
        return "\n".join(f"stage {s}: " + " ".join(map(str, ev))
                         for s, ev in enumerate(self.stages))


def _check_sizes(pp: int, m: int, site: str) -> None:
    for what, v in (("pp", pp), ("microbatches", m)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise PlanError(f"{site}: {what} must be a positive integer, got {v!r}")


def gpipe(pp: int, microbatches: int) -> Schedule:
    """GPipe: every stage runs ``F0 .. F(M-1)`` then ``B0 .. B(M-1)``."""
    site = user_site(2)
    _check_sizes(pp, microbatches, site)
    st = tuple(tuple([Event("F", m, site=site) for m in range(microbatches)]
                     + [Event("B", m, site=site) for m in range(microbatches)])
               for _ in range(pp))
    return Schedule("GPipe", st, microbatches)


def one_f_one_b(pp: int, microbatches: int) -> Schedule:
    """1F1B (PipeDream-Flush): stage ``s`` runs ``w = min(pp - s - 1, M)`` warm-up forwards,
    then ``F(w + i), B(i)`` for ``i < M - w``, then the remaining backwards."""
    site = user_site(2)
    _check_sizes(pp, microbatches, site)
    out = []
    for s in range(pp):
        w = min(pp - s - 1, microbatches)
        ev = [Event("F", m, site=site) for m in range(w)]
        for i in range(microbatches - w):
            ev += [Event("F", w + i, site=site), Event("B", i, site=site)]
        ev += [Event("B", m, site=site) for m in range(microbatches - w, microbatches)]
        out.append(tuple(ev))
    return Schedule("1F1B", tuple(out), microbatches)


def interleaved_one_f_one_b(pp: int, microbatches: int, chunks: int) -> Schedule:
    """Interleaved 1F1B with ``chunks`` (v) model chunks per stage (virtual stage ``c*pp + s``).

    The k-th forward of a stage runs chunk ``(k // pp) % v`` on micro-batch
    ``(k // (pp*v)) * pp + k % pp``; the k-th backward runs chunk ``v - 1 - (k // pp) % v`` on
    the same micro-batch formula; warm-up ``min((pp - s - 1) * 2 + (v - 1) * pp, M * v)``
    forwards (Megatron-LM ``get_model_chunk_id`` / ``forward_backward_pipelining_with_
    interleaving``).

    Raises:
        PlanError: ``M`` is not a multiple of ``pp`` (Megatron's requirement).
    """
    site = user_site(2)
    _check_sizes(pp, microbatches, site)
    _check_sizes(chunks, 1, site)
    if microbatches % pp:
        raise PlanError(f"{site}: interleaved 1F1B needs the micro-batch count ({microbatches}) "
                        f"to be a multiple of pp ({pp})")
    v, total = chunks, microbatches * chunks

    def fwd(k: int) -> Event:
        return Event("F", (k // (pp * v)) * pp + k % pp, (k // pp) % v, site=site)

    def bwd(k: int) -> Event:
        return Event("B", (k // (pp * v)) * pp + k % pp, v - 1 - (k // pp) % v, site=site)

    out = []
    for s in range(pp):
        w = min((pp - s - 1) * 2 + (v - 1) * pp, total)
        ev = [fwd(k) for k in range(w)]
        for i in range(total - w):
            ev += [fwd(w + i), bwd(i)]
        ev += [bwd(k) for k in range(total - w, total)]
        out.append(tuple(ev))
    return Schedule(f"interleaved 1F1B (v={v})", tuple(out), microbatches, chunks)


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "gpipe": gpipe, "1f1b": one_f_one_b, "interleaved_1f1b": interleaved_one_f_one_b,
}


def accumulation_steps(step: Schedule, steps: int, *, end_of_step: Sequence[Event] = (),
                       start_of_step: Callable[[int], Sequence[Event]] | None = None
                       ) -> Schedule:
    """``steps`` (K) runs of the pipeline schedule ``step`` (n micro-batches each) in one
    accumulation window, with the buffer carried across them (one optimizer step per window).

    Run ``k`` uses micro-batches ``k*n .. k*n + n - 1``; ``end_of_step`` hooks run on every
    stage after each run (e.g. a schedule's own ``scale(1/n)``, torchtitan #1733);
    ``start_of_step(k)`` gives hooks run before run ``k`` (e.g. a ``reset`` when the sequence
    length changes, NeMo Automodel PR #3530).
    """
    site = user_site(2)
    _check_sizes(steps, 1, site)
    n = step.microbatches
    stages: list[list[Event]] = [[] for _ in range(step.pp)]
    for k in range(steps):
        pre = tuple(start_of_step(k)) if start_of_step is not None else ()
        for s in range(step.pp):
            stages[s] += list(pre)
            stages[s] += [replace(e, mb=e.mb + k * n) if e.mb is not None else e
                          for e in step.stages[s]]
            stages[s] += list(end_of_step)
    return Schedule(f"{step.name} x {steps} steps", tuple(map(tuple, stages)), steps * n,
                    step.chunks)


def reset_on_length_change(lengths: Sequence[int], note: str = "") -> Callable[[int], list[Event]]:
    """``start_of_step`` hooks for :func:`accumulation_steps`: a ``reset`` before step ``k``
    when ``lengths[k] != lengths[k - 1]`` (NeMo Automodel PR #3530: the stages are
    re-initialised on a new sequence length and the re-initialisation sets every gradient to
    None). ``lengths``: the sequence length of each step, plan data."""
    site = user_site(2)
    ls = list(lengths)
    if not ls or not all(isinstance(x, int) and x > 0 for x in ls):
        raise PlanError(f"{site}: lengths must be positive integers, got {lengths!r}")

    def hooks(k: int) -> list[Event]:
        if k >= len(ls):
            raise PlanError(f"{site}: no sequence length for step {k} (lengths {ls})")
        if k > 0 and ls[k] != ls[k - 1]:
            return [Event("reset", note=note or f"sequence length {ls[k - 1]} -> {ls[k]}: "
                          "stages re-initialised, gradients set to None", site=site)]
        return []
    return hooks


def arm_reduction_in_last_forward(sch: Schedule, axis: Any, op: str = "avg") -> Schedule:
    """DDP with ``no_sync`` on every forward but the last (torchrec PR #4758): the last
    forward arms the gradient reduction, which fires at the end of the *next backward in this
    stage's event order* (not necessarily the last backward)."""
    site = user_site(2)
    ev_ar = Event("collective", axis=str(axis), op=op,
                  note="armed by the last forward, fires in the next backward", site=site)

    def f(s: int, ev: tuple[Event, ...]) -> list[Event]:
        last_f = max(i for i, e in enumerate(ev) if e.kind == "F")
        nxt = next(i for i in range(last_f + 1, len(ev)) if ev[i].kind == "B")
        return list(ev[:nxt + 1]) + [ev_ar] + list(ev[nxt + 1:])
    return sch.map_stages(f, f"{sch.name} + DDP reduce armed in last forward")


def reduce_after_last_backward(sch: Schedule, axis: Any, op: str = "avg") -> Schedule:
    """The gradient reduction after each stage's last backward (DDP with every forward under
    ``no_sync`` and one explicit reduction at the end)."""
    site = user_site(2)
    ev_ar = Event("collective", axis=str(axis), op=op, note="after the last backward",
                  site=site)
    return sch.map_stages(lambda s, ev: list(ev) + [ev_ar],
                          f"{sch.name} + reduce after last backward")


# -- buffer semantics ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Buffer:
    """A gradient buffer's exact value: ``sum over chains C of C(sum_m coeffs[C][m] * g_m)``.

    ``terms``: tuple of ``(chain, coefficients)``; a chain is a tuple of ``(axis, op)``
    collectives applied innermost first; ``coefficients`` has one exact Fraction per micro-batch.
    """

    microbatches: int
    terms: tuple[tuple[Chain, tuple[Fraction, ...]], ...]

    @staticmethod
    def zero(m: int) -> Buffer:
        return Buffer(m, ())

    def coefficients(self, chain: Chain = ()) -> tuple[Fraction, ...]:
        """The coefficients of ``chain`` (zeros if absent)."""
        for c, v in self.terms:
            if c == chain:
                return v
        return (Fraction(0),) * self.microbatches

    def _merge(self, items: Iterable[tuple[Chain, tuple[Fraction, ...]]]) -> Buffer:
        acc: dict[Chain, list[Fraction]] = {}
        for c, v in items:
            cur = acc.setdefault(c, [Fraction(0)] * self.microbatches)
            for i, x in enumerate(v):
                cur[i] += x
        return Buffer(self.microbatches,
                      tuple((c, tuple(v)) for c, v in acc.items() if any(v)))

    def add(self, m: int) -> Buffer:
        one = tuple(Fraction(int(i == m)) for i in range(self.microbatches))
        return self._merge(list(self.terms) + [((), one)])

    def scaled(self, k: Fraction) -> Buffer:
        return self._merge((c, tuple(k * x for x in v)) for c, v in self.terms)

    def reduced(self, axis: str, op: str, accumulate: bool) -> Buffer:
        new = [(c + ((axis, op),), v) for c, v in self.terms]
        return self._merge((list(self.terms) if accumulate else []) + new)

    @staticmethod
    def sharded_chain(chain: Chain) -> bool:
        """The chain went through a reduce-scatter (it is part of the sharded gradient)."""
        return any(is_scatter(op) for _, op in chain)

    def scattered(self, axis: str, op: str) -> Buffer:
        """``sharded += RS(unsharded); unsharded = 0`` (FSDP's reduce-scatter; ``op`` is the
        chain op ``"rs_avg:<dim>"``)."""
        step = (axis, op)
        return self._merge((c, v) if self.sharded_chain(c) else (c + (step,), v)
                           for c, v in self.terms)

    def describe(self) -> str:
        """``AR_avg[dp](1*g0) + 1*g1`` style, for reports."""
        if not self.terms:
            return "0"
        parts = []
        for c, v in self.terms:
            inner = " + ".join(f"{x}*g{m}" for m, x in enumerate(v) if x)
            for axis, op in c:
                inner = chain_text(axis, op, inner)
            parts.append(inner)
        return " + ".join(parts)


def buffer_after(events: Sequence[Event], microbatches: int, chunk: int = 0,
                 upto: int | None = None) -> Buffer:
    """The exact buffer of chunk ``chunk``'s parameters after ``events[:upto]`` (all events
    by default). ``B`` events of other chunks do not touch it; hooks act on the whole buffer."""
    buf = Buffer.zero(microbatches)
    for e in events[:upto]:
        match e.kind:
            case "F":
                pass
            case "B":
                if e.chunk == chunk:
                    if not 0 <= (e.mb or 0) < microbatches:
                        raise PlanError(f"{e.site}: B({e.mb}) outside micro-batches "
                                        f"0..{microbatches - 1}")
                    buf = buf.add(e.mb)  # type: ignore[arg-type]
            case "scale":
                buf = buf.scaled(e.factor)  # type: ignore[arg-type]
            case "reset":
                buf = Buffer.zero(microbatches)
            case "collective":
                buf = buf.reduced(e.axis, _chain_op(e), e.accumulate)  # type: ignore[arg-type]
            case "reduce_scatter":
                buf = buf.scattered(e.axis, _chain_op(e))  # type: ignore[arg-type]
            case _:
                raise PlanError(f"{e.site}: unknown event kind {e.kind!r}")
    return buf


def final_buffer(sch: Schedule, stage: int, chunk: int = 0) -> Buffer:
    """The buffer handed on after stage ``stage``'s last event."""
    return buffer_after(sch.stages[stage], sch.microbatches, chunk)


def collective_reads(sch: Schedule, stage: int, chunk: int = 0) -> list[tuple[int, Event, Buffer]]:
    """For every collective of stage ``stage``: (event index, event, the buffer it reads), i.e.
    exactly which micro-batch contributions are in the buffer when it fires."""
    ev = sch.stages[stage]
    return [(i, e, buffer_after(ev, sch.microbatches, chunk, upto=i))
            for i, e in enumerate(ev) if e.kind in ("collective", "reduce_scatter")]


def _check_transfer_order(sch: Schedule, site: str) -> None:
    """Point-to-point transfers are in order (Megatron's p2p, untagged): virtual stage
    ``j + 1`` receives ``j``'s activations in ``j``'s forward order, and ``j`` receives
    ``j + 1``'s gradients in ``j + 1``'s backward order. A different order is a PlanError
    naming the receiving stage's first out-of-order event (else the receiver would take one
    micro-batch's tensor as another's, or block)."""
    pp, nv = sch.pp, sch.pp * sch.chunks

    def order(kind: str, j: int) -> list[Event]:
        c, s = divmod(j, pp)
        return [e for e in sch.stages[s] if e.kind == kind and e.chunk == c]

    for j in range(nv - 1):
        for kind, src, dst in (("F", j, j + 1), ("B", j + 1, j)):
            sent, got = order(kind, src), order(kind, dst)
            for a, b in zip(sent, got):
                if a.mb != b.mb:
                    raise PlanError(
                        f"{b.site or site}: stage {dst % pp} runs {b} where virtual stage "
                        f"{src} sent micro-batch {a.mb} ({kind} order "
                        f"{' '.join(str(e.mb) for e in sent)} on virtual stage {src}, "
                        f"{' '.join(str(e.mb) for e in got)} on virtual stage {dst}) in schedule "
                        f"{sch.name!r}: in-order send/recv would pair different micro-batches; "
                        "run the forwards (backwards) of consecutive stages in the same order")


def validate(sch: Schedule, site: str = "") -> None:
    """Check ``sch`` is executable (module docstring).

    Raises:
        PlanError: a missing or repeated ``F``/``B``, a backward before its forward, or a
            deadlock (naming the stages and their blocked events).
    """
    site = site or user_site(2)
    pp, m, v = sch.pp, sch.microbatches, sch.chunks
    for s, ev in enumerate(sch.stages):
        for i, e in enumerate(ev):
            if not isinstance(e, Event):
                raise PlanError(f"{site}: stage {s} event {i} of schedule {sch.name!r} is "
                                f"{e!r}, not a schedule Event; build events with F(m), B(m), "
                                "scale(c), reset(), collective(axis, op) or "
                                "reduce_scatter(axis, dim, op)")
            if e.kind in ("collective", "reduce_scatter") and e.axis == "mb":
                raise PlanError(f"{e.site or site}: a buffer collective over 'mb': the "
                                "micro-batch axis is the accumulation loop, not a process "
                                "group; the B events already sum the micro-batches")
    for s, ev in enumerate(sch.stages):
        seen: dict[tuple[str, int, int], int] = {}
        for i, e in enumerate(ev):
            if e.kind in ("F", "B"):
                if e.mb is None or not 0 <= e.mb < m or not 0 <= e.chunk < v:
                    raise PlanError(f"{site}: stage {s} event {i} {e}: micro-batch must be in "
                                    f"0..{m - 1} and chunk in 0..{v - 1}")
                key = (e.kind, e.mb, e.chunk)
                if key in seen:
                    raise PlanError(f"{site}: stage {s} runs {e} twice (events {seen[key]} and "
                                    f"{i}) in schedule {sch.name!r}")
                seen[key] = i
                if e.kind == "B" and ("F", e.mb, e.chunk) not in seen:
                    raise PlanError(f"{site}: stage {s} runs {e} before its forward in "
                                    f"schedule {sch.name!r}")
        for kind in ("F", "B"):
            for mb in range(m):
                for c in range(v):
                    if (kind, mb, c) not in seen:
                        name = f"{kind}{mb}" + (f".{c}" if c else "")
                        raise PlanError(f"{site}: stage {s} never runs {name} in schedule "
                                        f"{sch.name!r}: that micro-batch's "
                                        f"{'gradient never reaches the buffer' if kind == 'B' else 'activation is never sent on'}")
    _check_transfer_order(sch, site)
    # dependency simulation: virtual stage j = c * pp + s
    nv = pp * v
    done: set[tuple[str, int, int]] = set()          # (kind, mb, virtual stage)
    pos = [0] * pp
    progress = True
    while progress:
        progress = False
        for s in range(pp):
            ev = sch.stages[s]
            while pos[s] < len(ev):
                e = ev[pos[s]]
                if e.kind in ("F", "B"):
                    j = e.chunk * pp + s
                    if e.kind == "F" and j > 0 and ("F", e.mb, j - 1) not in done:
                        break
                    if e.kind == "B" and j < nv - 1 and ("B", e.mb, j + 1) not in done:
                        break
                    done.add((e.kind, e.mb, j))      # type: ignore[arg-type]
                pos[s] += 1
                progress = True
    stuck = [(s, sch.stages[s][pos[s]]) for s in range(pp) if pos[s] < len(sch.stages[s])]
    if stuck:
        desc = "; ".join(f"stage {s} waits at {e} (event {pos[s]})" for s, e in stuck)
        raise PlanError(f"{site}: schedule {sch.name!r} deadlocks with blocking send/recv: "
                        f"{desc}")
