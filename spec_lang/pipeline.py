"""Pipeline parallelism: stages, point-to-point transfers, tied parameters, the gradient buffer.

A :class:`Pipeline` splits the model into *virtual stages* (model order), each a function
``forward(params, data, io)`` that reads only the parameters it holds. Virtual stage ``j`` runs
on pipeline stage ``j % pp`` as its model chunk ``j // pp`` (one chunk per stage unless the
schedule is interleaved 1F1B). Activations move between consecutive virtual stages by explicit
point-to-point transfers: stage ``j`` calls ``io.send(x)``, stage ``j + 1`` calls
``io.recv()``. Over the reals a transfer is the identity, so no node is added to the term, but
the pairing is checked while tracing: a ``recv`` with no matching ``send`` (a missing send), a
``send`` nobody receives, or two sends are :class:`~spec_lang.errors.PlanError` s naming the
stage and line. The last virtual stage returns the loss (a Tensor or a ``Loss``).

Gradients are the loop-carried buffers of :mod:`spec_lang.schedules`: the schedule (plan data)
gives each stage's event order; a parameter held by virtual stage ``(s, c)`` gets the buffer of
stage ``s``'s events restricted to chunk ``c``. The buffer is lowered to terms exactly:

    buf = sum over chains C:  C( ALL_REDUCE( RANK_CONST(mb, [c_0, ..., c_{M-1}]) * g, mb ) )

with ``g`` the per-micro-batch local gradient (traced once; it varies over ``mb``), the
coefficients computed by :func:`spec_lang.schedules.buffer_after` and each chain's collectives
applied with the DSL's own ``all_reduce`` (``avg`` writes ``1/|axis|`` explicitly). With every
coefficient equal to ``c`` this is ``c * ALL_REDUCE(g, mb)`` by the rules ``rank-const-uniform``
and ``allreduce-mul-factor``; with unequal ones it is not, and the refuter shows it.

**Tied parameters** (an input embedding reused as the output projection, Megatron's
``shared_embedding``) are listed by every virtual stage that uses them. Each stage keeps its own
copy and its own buffer, filled with its *stage-local* gradient: the derivative through its own
uses only (the uses on other stages are ``stop_gradient`` while tracing that stage's local
gradient, which is exactly the contribution that stage's backward computes). The per-stage value
is a tensor that varies over the ``pp`` axis: ``sum_s RANK_CONST(pp, e_s) * local_s`` (``e_s``
the indicator of stage ``s``). The plan must reduce it over the stage group, e.g.
``reduce_grads={"emb": lambda n, g: all_reduce(g, PP)}``; forgetting it leaves each stage with
only its own part, a refuted goal.

**Which stage is observed.** A parameter held by a single stage exists only there; its outputs
(gradient, updated value, optimizer state) are read on the stage that holds it:
``BROADCAST(x, pp, s)`` when ``x`` varies over ``pp`` (e.g. a per-stage clipping coefficient,
torchtitan #596), unchanged otherwise. A tied parameter's outputs are checked on every stage.

Per-stage values (the squared gradient norm of the parameters a stage holds) are built with
:meth:`Pipeline.per_stage`; a global norm must then all-reduce them over ``pp``.

**A gradient exists only on the stages holding it** (adv2 F1). ``grad_norm_sq`` receives
``RANK_CONST(pp, e_S) * g`` (:meth:`Pipeline.held_grads`), so a norm that reads another stage's
gradient without a ``pp`` reduction varies over ``pp`` and is refuted; a collective over ``pp``
on a one-stage gradient (``reduce_grads`` or a schedule hook) is a PlanError, because on
hardware the pp group would combine different parameters' buffers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec_lang.accumulation import (
    Accumulation, _accum_dtype, _accumulated, _buffer_dtype, _check_event_axes, _check_loss,
    _check_microbatches, _first_scatter, lower_buffer,
)
from spec_lang.autodiff import grad
from spec_lang.collectives import all_reduce
from spec_lang.errors import PlanError
from spec_lang.ops import const, rank_const, stop_gradient
from spec_lang.plan import Loss
from spec_lang.rng import StageInfo, in_stage
from spec_lang.schedules import Buffer, Schedule, final_buffer, validate
from spec_lang.spec import Params
from spec_lang.tensor import Tensor, user_site
from spec_lang.term import COLLECTIVE, Axis, Op, Term, term, varying_axes, walk

__all__ = ["Stage", "StageIO", "Pipeline", "Accumulation", "lower_buffer", "stage"]

PP, MB = str(Axis.PP), str(Axis.MB)


@dataclass(frozen=True)
class Stage:
    """A virtual pipeline stage: its forward and the parameters it holds.

    Attributes:
        forward: ``forward(params, data, io) -> None | Tensor | Loss``; ``params`` is the view
            of the parameters this stage holds; the last virtual stage returns the loss.
        params: parameter names, or prefixes ending in ``"."`` (``"layers.0."``), held here.
        site: the plan line that declared the stage.
    """

    forward: Callable[..., Any]
    params: tuple[str, ...]
    site: str = field(default="", compare=False)

    def holds(self, name: str) -> bool:
        return any(name == p or (p.endswith(".") and name.startswith(p)) for p in self.params)


def stage(forward: Callable[..., Any], params: Sequence[str]) -> Stage:
    """Declare a virtual stage (see :class:`Stage`).

    Raises:
        PlanError: ``forward`` is not callable or ``params`` is not a list of names.
    """
    site = user_site(2)
    if not callable(forward):
        raise PlanError(f"{site}: stage forward must be a function (params, data, io)")
    if isinstance(params, str) or not all(isinstance(p, str) for p in params):
        raise PlanError(f"{site}: stage params must be a list of parameter names or prefixes")
    return Stage(forward, tuple(params), site)


class StageIO:
    """Point-to-point transfers of one virtual stage (identity over the reals, checked)."""

    def __init__(self, j: int, incoming: Tensor | None, n: int):
        self.j, self.n = j, n
        self._incoming = incoming
        self.received = False
        self.sent: Tensor | None = None
        self.send_site = ""

    def recv(self) -> Tensor:
        """The activation sent by the previous virtual stage.

        Raises:
            PlanError: this is the first stage, nothing was sent (a missing send), or a second
                recv.
        """
        site = user_site(2)
        if self.j == 0:
            raise PlanError(f"{site}: virtual stage 0 calls recv(); the first stage has no "
                            "previous stage to receive from")
        if self._incoming is None:
            raise PlanError(f"{site}: virtual stage {self.j} receives, but virtual stage "
                            f"{self.j - 1} never sent (missing send): the recv would block")
        if self.received:
            raise PlanError(f"{site}: virtual stage {self.j} receives twice; stage "
                            f"{self.j - 1} sent once")
        self.received = True
        return self._incoming

    def send(self, x: Tensor) -> None:
        """Send ``x`` to the next virtual stage.

        Raises:
            PlanError: the last stage sends, a second send, or ``x`` is not a Tensor.
        """
        site = user_site(2)
        if not isinstance(x, Tensor):
            raise PlanError(f"{site}: send() needs a Tensor, got {type(x).__name__}")
        if self.j == self.n - 1:
            raise PlanError(f"{site}: the last virtual stage ({self.j}) sends, but no stage "
                            "follows it; return the loss instead")
        if self.sent is not None:
            raise PlanError(f"{site}: virtual stage {self.j} sends twice (first at "
                            f"{self.send_site}); one activation per micro-batch")
        self.sent, self.send_site = x, site


@dataclass(frozen=True)
class Pipeline:
    """Pipeline-parallel program: virtual stages, a schedule, the gradient buffers.

    Attributes:
        stages: virtual stages in model order; ``len(stages) == schedule.pp * schedule.chunks``.
        schedule: the per-stage event order (:mod:`spec_lang.schedules`).
        axis: the mesh axis of the pipeline (``"pp"``).
        accum_dtype: the dtype of every stage's gradient buffer (``"bf16"``: a precision-lint
            finding; default: ``microbatches(accum_dtype=...)``, else the gradients' own).
    """

    stages: tuple[Stage, ...]
    schedule: Schedule
    axis: str = PP
    accum_dtype: str | None = None
    site: str = field(default="", compare=False)

    def __init__(self, stages: Sequence[Stage], schedule: Schedule, axis: Any = PP, *,
                 accum_dtype: str | None = None):
        object.__setattr__(self, "site", user_site(2))
        object.__setattr__(self, "stages", tuple(stages))
        object.__setattr__(self, "schedule", schedule)
        object.__setattr__(self, "axis", str(axis))
        object.__setattr__(self, "accum_dtype", _accum_dtype(accum_dtype, self.site))
        if not all(isinstance(s, Stage) for s in self.stages):
            raise PlanError(f"{self.site}: Pipeline stages must be stage(forward, params)")
        if not isinstance(schedule, Schedule):
            raise PlanError(f"{self.site}: Pipeline schedule must be a Schedule (gpipe(...), "
                            "one_f_one_b(...), ...)")
        n = schedule.pp * schedule.chunks
        if len(self.stages) != n:
            raise PlanError(f"{self.site}: {len(self.stages)} virtual stages but the schedule "
                            f"{schedule.name!r} has pp={schedule.pp} x {schedule.chunks} "
                            f"chunk(s) = {n}")
        validate(schedule, self.site)
        object.__setattr__(self, "_holders", {})

    # -- placement of parameters ---------------------------------------------------------------
    def where(self, j: int) -> tuple[int, int]:
        """(physical stage, chunk) of virtual stage ``j``."""
        pp = self.schedule.pp
        return j % pp, j // pp

    def holders(self, name: str) -> list[int]:
        """Virtual stages holding parameter ``name`` (a fresh list; memoised per name, as the
        stages are immutable)."""
        held = self._holders.get(name)
        if held is None:
            held = self._holders[name] = tuple(j for j, s in enumerate(self.stages)
                                               if s.holds(name))
        return list(held)

    def owner(self, name: str) -> int | None:
        """The physical stage of a parameter held by one stage (None if tied)."""
        st = {self.where(j)[0] for j in self.holders(name)}
        return next(iter(st)) if len(st) == 1 else None

    def _stage_info(self, j: int) -> StageInfo:
        """Where virtual stage ``j``'s dropout draws come from: the generator of its physical
        stage's process, offsets from 0, advancing per forward in the stage's event order.
        Modelled for one model chunk per stage with every stage's forwards in micro-batch
        order (GPipe, 1F1B); otherwise the reason it is not."""
        s, _ = self.where(j)
        sch = self.schedule
        why = ""
        if sch.chunks > 1:
            why = (f"schedule {sch.name!r} runs {sch.chunks} model chunks per stage "
                   "(interleaved): the per-stage draw order is not modelled")
        else:
            fw = [e.mb for e in sch.stages[s] if e.kind == "F"]
            if fw != sorted(fw):
                why = (f"stage {s} runs its forwards out of micro-batch order ({fw}): the "
                       "per-stage draw order is not modelled")
        return StageInfo(s, self.axis, why)

    # -- the composed forward -------------------------------------------------------------------
    def _run(self, params: Mapping[str, Tensor], data: Mapping[str, Tensor],
             only: tuple[str, int] | None = None) -> Any:
        """Run the virtual stages in order; ``only = (name, j)``: uses of ``name`` outside
        virtual stage ``j`` are stop-gradient (its stage-local gradient)."""
        n = len(self.stages)
        incoming: Tensor | None = None
        out: Any = None
        for j, st in enumerate(self.stages):
            view = {}
            for k, t in params.items():
                if st.holds(k):
                    view[k] = stop_gradient(t) if only is not None and only[0] == k \
                        and only[1] != j else t
            io = StageIO(j, incoming, n)
            with in_stage(self._stage_info(j)):  # dropout here: per-stage generators (rng.py)
                out = st.forward(_StageParams(view, j, st.site, list(params)), data, io)
            if j > 0 and not io.received:
                raise PlanError(f"{st.site}: virtual stage {j} never calls recv(); the "
                                f"activation virtual stage {j - 1} sent is never consumed")
            if j < n - 1:
                if io.sent is None:
                    raise PlanError(f"{st.site}: virtual stage {j} never calls send() (missing "
                                    f"send): virtual stage {j + 1}'s recv would block")
                if out is not None:
                    raise PlanError(f"{st.site}: virtual stage {j} returns a value; only the "
                                    "last stage returns the loss, the others send()")
            for x in ([io.sent] if io.sent is not None else []) + [
                    t for t in ((out.backward, out.report) if isinstance(out, Loss) else (out,))
                    if isinstance(t, Tensor)]:
                if self.axis in varying_axes(x.term):
                    # the composed program runs every stage's code on every pp coordinate, so
                    # code that reads the pp coordinate would be evaluated on the wrong stage
                    raise PlanError(f"{x.site}: virtual stage {j} computes {x.describe()}, "
                                    f"which depends on the {self.axis!r} coordinate; write "
                                    "per-stage behaviour as separate stage functions (no "
                                    f"rank({self.axis!r}), no placement over {self.axis!r})")
            incoming = io.sent
        return out

    def forward(self, params: Mapping[str, Tensor], data: Mapping[str, Tensor]) -> Any:
        """The whole model as one per-micro-batch forward (for ``Plan(forward=...)``)."""
        return self._run(params, data)

    def per_stage(self, values: Mapping[int, Tensor] | Callable[[int], Tensor]) -> Tensor:
        """The per-stage value ``sum_s RANK_CONST(pp, e_s) * values[s]`` (varies over pp).

        ``values``: physical stage -> scalar or tensor (missing stages hold 0), or a function
        of the stage.
        """
        pp = self.schedule.pp
        vals = values if isinstance(values, Mapping) else {s: values(s) for s in range(pp)}
        out: Tensor | None = None
        for s, v in sorted(vals.items()):
            if isinstance(v, Tensor):
                v = Tensor(_on_stage(v.term, self.axis, s), v.site, v.name)
            x = rank_const(self.axis, [int(i == s) for i in range(pp)]) * v
            out = x if out is None else out + x
        if out is None:
            raise PlanError(f"{user_site(2)}: per_stage needs at least one stage's value")
        return out

    def params_of_stage(self, s: int, names: Sequence[str]) -> list[str]:
        """The parameters among ``names`` that physical stage ``s`` holds."""
        return [k for k in names if any(self.where(j)[0] == s for j in self.holders(k))]

    def stages_of(self, name: str) -> list[int]:
        """The physical stages holding parameter ``name`` (sorted, no repeats)."""
        return sorted({self.where(j)[0] for j in self.holders(name)})

    def held_grads(self, grads: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The gradients as the stages hold them: ``RANK_CONST(pp, e_S) * g`` with ``e_S`` the
        indicator of the stages holding the parameter (0 elsewhere: a stage's local norm
        iterates over its own parameters only, B22 / torchtitan #596). A norm that reads another
        stage's gradient without a ``pp`` reduction then varies over ``pp`` and is refuted."""
        pp = self.schedule.pp
        if pp == 1:
            return dict(grads)
        out = {}
        for k, g in grads.items():
            st = self.stages_of(k)
            out[k] = g if len(st) == pp or not isinstance(g, Tensor) else \
                rank_const(self.axis, [int(i in st) for i in range(pp)]) * g
        return out

    def check_reduced(self, name: str, before: Tensor, after: Any) -> None:
        """A collective over ``pp`` that ``reduce_grads`` applies to the gradient of a parameter
        held by one stage is a :class:`PlanError`: the other stages hold other parameters, so
        the pp group's all-reduce would combine stage ``s``'s buffer with theirs."""
        if self.schedule.pp == 1 or len(self.stages_of(name)) != 1 \
                or not isinstance(after, Tensor):
            return
        # collectives the reducer added: reachable from ``after`` other than through
        # ``before`` (a walk over the reducer's few nodes), and not inside ``before`` either
        new = _pp_collectives(after.term, self.axis, stop=before.term)
        if new:
            new -= _pp_collectives(before.term, self.axis)
        if new:
            op = sorted(new, key=str)[0]
            raise PlanError(f"{after.site}: reduce_grads applies {op.op.name} over "
                            f"{self.axis!r} to grad:{name}, which only pipeline stage "
                            f"{self.stages_of(name)[0]} holds: on the other stages the "
                            f"{self.axis} group's collective reads other parameters' buffers; "
                            f"reduce over {self.axis!r} only parameters held by several stages "
                            "(tied), and compute norms per stage (pipe.per_stage)")

    def stage_grads(self, s: int, grads: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The gradients stage ``s`` counts in a norm: the parameters it holds, a tied
        parameter only on the first stage holding it (so the stages' sets are disjoint)."""
        return {k: g for k, g in grads.items()
                if self.holders(k) and self.where(self.holders(k)[0])[0] == s}

    # -- the gradient loop ----------------------------------------------------------------------
    def trace(self, plan: Any, params: Mapping[str, Tensor], data: Mapping[str, Tensor],
              names: Sequence[str]) -> tuple[Tensor, list[Tensor]]:
        """Reported loss (summed over ``mb``) and, per parameter, its buffer after the loop.

        Raises:
            PlanError: a parameter on no stage, mesh / micro-batch count mismatch, transfer
                errors (see :class:`StageIO`).
        """
        sch = self.schedule
        mesh = plan.mesh.sizes
        if sch.pp > 1 and mesh.get(self.axis) != sch.pp:
            raise PlanError(f"{self.site}: the schedule has {sch.pp} stages but the mesh's "
                            f"{self.axis!r} axis is {mesh.get(self.axis)}; use Mesh("
                            f"{self.axis}={sch.pp}, ...)")
        if plan.forward != self.forward:
            raise PlanError(f"{plan.site}: Plan(schedule=<Pipeline>) runs the pipeline's "
                            "stages; pass forward=<that pipeline>.forward (the given forward "
                            "would be ignored)")
        _check_event_axes(sch.stages, mesh, self.site)
        loop = _check_microbatches(plan, sch.microbatches, self.site)
        missing = [k for k in names if not self.holders(k)]
        if missing:
            raise PlanError(f"{self.site}: parameters on no pipeline stage: {missing[:6]}; "
                            "list them in a stage's params")
        cache: dict[tuple[int, int], Buffer] = {}

        def buffers(s: int, c: int) -> Buffer:   # one per (stage, chunk), not per parameter
            if (s, c) not in cache:
                cache[(s, c)] = final_buffer(sch, s, c)
            return cache[(s, c)]

        seed, rep = _check_loss(self._run(params, data), self.site)
        own = (self.accum_dtype, self.site)
        gs = [_buffer_dtype(plan, g, own) for g in grad(seed.term, [params[k].term for k in names])]
        out = []
        for k, g in zip(names, gs):
            holders = self.holders(k)
            if sch.pp > 1 and len(self.stages_of(k)) == 1:
                self._check_pp_hooks(k)
            if len(holders) == 1:
                s, c = self.where(holders[0])
                out.append(lower_buffer(buffers(s, c), Tensor(g, seed.site, f"grad:{k}"), loop,
                                        _first_scatter(sch.stages[s])))
                continue
            per_stage: dict[int, Tensor] = {}
            for j in holders:
                sd, _ = _check_loss(self._run(params, data, only=(k, j)), self.site)
                gj = _unstop(grad(sd.term, [params[k].term])[0], params[k].term)
                a = Tensor(_buffer_dtype(plan, gj, own), seed.site, f"grad:{k}")
                s, c = self.where(j)
                b = lower_buffer(buffers(s, c), a, loop, _first_scatter(sch.stages[s]))
                per_stage[s] = b if s not in per_stage else per_stage[s] + b
            out.append(per_stage[next(iter(per_stage))] if len(per_stage) == 1
                       else self.per_stage(per_stage))
        return _accumulated(rep, loop), out

    def _check_pp_hooks(self, name: str) -> None:
        """A schedule collective over ``pp`` on a buffer of a parameter one stage holds is a
        PlanError (see :meth:`check_reduced`), naming the event's plan line."""
        s = self.stages_of(name)[0]
        for e in self.schedule.stages[s]:
            if e.kind == "collective" and e.axis == self.axis:
                raise PlanError(f"{e.site or self.site}: stage {s} runs a buffer collective "
                                f"over {self.axis!r} ({e}) on grad:{name}, which only stage {s} "
                                f"holds: the {self.axis} group's all-reduce would combine its "
                                "buffer with the other stages' (other parameters); reduce "
                                f"over {self.axis!r} only tied parameters (reduce_grads)")

    def observe(self, param: str, t: Term) -> Term:
        """An output of ``param`` as seen on the stage that holds it (module docstring)."""
        s = self.owner(param)
        if s is None or self.schedule.pp == 1 or self.axis not in varying_axes(t):
            return t
        return term(Op.BROADCAST, (t,), (self.axis, s), t.dims)


def _on_stage(t: Term, axis: str, s: int) -> Term:
    """``t`` as evaluated on coordinate ``s`` of ``axis``, when that is exact by substitution.

    ``per_stage`` multiplies stage ``s``'s value by the indicator ``e_s``, so only its value on
    coordinate ``s`` matters: ``e_s * v = e_s * v(s)``. When ``v`` depends on ``axis`` only
    through ``RANK_CONST(axis, vs)`` leaves (no collective over ``axis``, nothing sharded over
    it), ``v(s)`` is ``v`` with each such leaf replaced by ``CONST(vs[s])`` (e.g. a held
    gradient ``RANK_CONST(pp, e_S) * g`` is ``g`` on a stage in ``S``, ``0`` elsewhere).
    Otherwise ``t`` is returned unchanged."""
    if axis not in varying_axes(t) or _pp_collectives(t, axis):
        return t
    new: dict[int, Term] = {}
    for x in walk(t):                              # children first, no recursion (deep models)
        if x.op is Op.RANK_CONST and x.attrs[0] == axis:
            new[id(x)] = term(Op.CONST, (), (x.attrs[1][s],), x.dims)
        elif not x.args or axis not in varying_axes(x):
            new[id(x)] = x
        else:
            args = tuple(new[id(a)] for a in x.args)
            new[id(x)] = x if all(a is b for a, b in zip(args, x.args)) else \
                term(x.op, args, x.attrs, x.dims)
    out = new[id(t)]
    return t if axis in varying_axes(out) else out


def _pp_collectives(t: Term, axis: str, stop: Term | None = None) -> set[Term]:
    """The collective nodes over ``axis`` in ``t`` (not entering ``stop``)."""
    out: set[Term] = set()
    seen = {id(stop)} if stop is not None else set()
    stack = [t]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.op in COLLECTIVE and x.attrs and x.attrs[0] == axis:
            out.add(x)
        stack.extend(x.args)
    return out


class _StageParams(Params):
    """A stage's parameter view: reading a parameter the stage does not hold is an error."""

    def __init__(self, tensors: Mapping[str, Tensor], j: int, site: str, every: list[str],
                 prefix: str = ""):
        super().__init__(tensors, prefix)
        self._j, self._site, self._every = j, site, every

    def scope(self, prefix: str) -> Params:
        return _StageParams(self._t, self._j, self._site, self._every,
                            f"{self._prefix}{prefix}.")

    def __getitem__(self, key: str) -> Tensor:
        full = self._prefix + key
        if full not in self._t and full in self._every:
            raise PlanError(f"{user_site(2)}: virtual stage {self._j} reads parameter {full!r}, "
                            "which it does not hold; add it to this stage's params (a tied "
                            "parameter) or move the layer")
        return super().__getitem__(key)


def _unstop(g: Term, p: Term) -> Term:
    """``g`` with every ``STOP_GRAD(p)`` replaced by ``p`` (the same value: stop-gradient is the
    identity forward). A tied parameter's per-stage gradient is taken with its other stages'
    uses stop-gradient (:meth:`Pipeline._run`); once taken, the stop marks have done their job,
    and without them the per-stage term shares its forward and its adjoints with the main
    trace, node for node: the prover's layer cuts then apply to it too (issue 14: DeepSeek-V3's
    tied embedding was proved on its whole terms, 61 layers forward and backward)."""
    stopped = term(Op.STOP_GRAD, (p,), (), p.dims)
    new: dict[int, Term] = {id(stopped): p}
    for t in walk(g):
        if id(t) in new:
            continue
        args = tuple(new.get(id(c), c) for c in t.args)
        if any(x is not y for x, y in zip(args, t.args)):
            new[id(t)] = term(t.op, args, t.attrs, t.dims)
    return new.get(id(g), g)
