"""One training iteration as terms: forward, loss, backward, optimizer update.

:func:`trace_spec` and :func:`trace_plan` return an :class:`Iteration`: output name -> term.
Outputs: ``"loss"``; ``"grad:<p>"`` (the gradient handed to the optimizer); ``"<p>"`` (the
updated parameter); ``"<state>:<p>"`` (optimizer state, e.g. ``exp_avg:<p>``).
:func:`build_problem` pairs them into :class:`~spec_lang.problem.Goal` s: the expected value of a
plan output is the spec output through the output's placement (its parameter's placement;
``loss`` is replicated).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from spec_lang.autodiff import grad, lower
from spec_lang.dims import Dim
from spec_lang.errors import PlanError, SpecError
from spec_lang.placement import (
    Partial, PlacementMap, Shard, describe_placements, expected_through, lineage,
    placement_errors,
)
from spec_lang.ops import sqrt
from spec_lang.optim import (
    GradOrNone, apply_step, clip_coefficient, first_counter, global_norm_sq, optimizer_for,
    run_init, tensor_state,
)
from spec_lang.plan import Loss, Plan
from spec_lang.problem import CutPoint, Goal, Problem
from spec_lang.spec import Params, Spec, input_term
from spec_lang.tensor import Tensor, TraceContext, record_site, tracing
from spec_lang.term import Binding, DimSpec, Op, Term, term

__all__ = ["Iteration", "trace_spec", "trace_plan", "build_problem", "DEFAULT_ASSUMPTIONS"]

DEFAULT_ASSUMPTIONS: tuple[str, ...] = (
    "equality is over the reals (floating-point effects are the precision lint's job)",
)
"""What every verdict assumes. The spec's denominators are not assumed wholesale: the prover
lists those the input domains do not settle (``proofs/denominators.py``, issue 10)."""


@dataclass(frozen=True)
class Iteration:
    """Output name -> term, with each output's kind and the sizes of every dim seen."""

    outputs: dict[str, Term]
    kinds: dict[str, str]
    sizes: dict[str, int]
    sites: dict[str, str] = field(default_factory=dict)
    cuts: dict[str, Term] = field(default_factory=dict)      # marked boundaries (first mark)
    adjoints: dict[str, Term] = field(default_factory=dict)  # their adjoints (backward cuts)


def _mark(ctx: TraceContext, name: str, t: Tensor) -> None:
    """Record an optimizer-input value (a gradient, a squared norm) as a cut point."""
    ctx.boundaries.append((name, t.term, t.site))


def _cut_terms(ctx: TraceContext) -> tuple[dict[str, Term], dict[str, Term]]:
    """The first term marked under each name, and the first adjoint recorded for it."""
    cuts: dict[str, Term] = {}
    for name, t, _ in ctx.boundaries:
        cuts.setdefault(name, t)
    adjoints: dict[str, Term] = {}
    for name, t, g in ctx.adjoints:
        if cuts.get(name) is t:
            adjoints.setdefault(name, g)
    return cuts, adjoints


def _record_dims(ctx: TraceContext, spec: Spec) -> None:
    for k, dims in spec.params.items():
        for d in dims:
            ctx.record_dim(d, site=spec.site)
    for k, dat in spec.data.items():
        for d in dat.dims + ((dat.range,) if dat.range is not None else ()):
            ctx.record_dim(d, site=spec.site)


def _check_loss(x: object, site: str, cls: type[Exception], what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise cls(f"{site}: {what} must return a Tensor (the loss), got {type(x).__name__}")
    if x.dims:
        raise cls(f"{x.site}: {what} returned {x.describe()}, the loss must be a scalar; sum or "
                  "mean it")
    return x


def _state_term(spec: Spec, st: str, domain: str, name: str) -> Term:
    return input_term(f"{st}:{name}", "state", domain, spec.params[name])


def trace_spec(spec: Spec) -> Iteration:
    """Trace the spec's iteration on full tensors.

    Raises:
        SpecError: shape errors (naming the user's line), a non-scalar loss.
    """
    ctx = TraceContext("spec")
    _record_dims(ctx, spec)
    outputs: dict[str, Term] = {}
    kinds: dict[str, str] = {}
    with tracing(ctx):
        params = {k: Tensor(spec.param_term(k), spec.site, k) for k in spec.params}
        data = {k: Tensor(spec.data_term(k), spec.site, k) for k in spec.data}
        loss = _check_loss(spec.forward(Params(params), data), spec.site, SpecError,
                           "the spec's forward")
        grads = grad(loss.term, [params[k].term for k in spec.params])
        outputs["loss"], kinds["loss"] = loss.term, "loss"
        gts = {k: Tensor(g, spec.site, f"grad:{k}") for k, g in zip(spec.params, grads)}
        for k, g in gts.items():
            outputs[f"grad:{k}"], kinds[f"grad:{k}"] = g.term, "grad"
            _mark(ctx, f"grad:{k}", g)
        if spec.clip_grad_norm is not None and spec.clip_groups is not None:
            for grp, names in spec.clip_groups.items():   # one clip_grad_norm_ per group
                total = global_norm_sq([gts[k] for k in names])
                _mark(ctx, f"grad_norm_sq:{grp}", total)
                outputs[f"grad_norm:{grp}"], kinds[f"grad_norm:{grp}"] = sqrt(total).term, "grad"
                coef = clip_coefficient(total, spec.clip_grad_norm)
                gts.update({k: gts[k] * coef for k in names})
        elif spec.clip_grad_norm is not None:
            total = global_norm_sq(list(gts.values()))
            _mark(ctx, "grad_norm_sq", total)
            outputs["grad_norm"], kinds["grad_norm"] = sqrt(total).term, "grad"
            coef = clip_coefficient(total, spec.clip_grad_norm)
            gts = {k: g * coef for k, g in gts.items()}
        for k, g in gts.items():
            opt = optimizer_for(spec.optimizer, k)
            state = tensor_state(opt, params[k], {
                st: Tensor(_state_term(spec, st, dom, k), spec.site)
                for st, dom in opt.state().items()})
            new = apply_step(opt, k, params[k], g, state, first_counter(opt))
            for name, t in new.items():
                outputs[name], kinds[name] = t.term, ("param" if name == k else "state")
    cuts, adjoints = _cut_terms(ctx)
    return Iteration(outputs, kinds, dict(ctx.sizes), cuts=cuts, adjoints=adjoints)


def _plan_errors(plan: Plan, spec: Spec, sizes: Mapping[str, int]) -> list[str]:
    errs: list[str] = []
    known = list(spec.params) + list(spec.data)
    for name in plan.placements:
        if name not in known:
            errs.append(f"{plan.site}: placement for {name!r}, which is not a spec input; spec "
                        f"inputs are {known[:12]}{' ...' if len(known) > 12 else ''}")
    dims_of: dict[str, tuple[Dim, ...]] = {**{k: v for k, v in spec.params.items()},
                                           **{k: v.dims for k, v in spec.data.items()}}
    for name, dims in dims_of.items():
        pl = plan.placements.get(name, {})
        errs += placement_errors(name, {d.name: d.size for d in dims}, pl, plan.mesh.sizes,
                                 plan.site)
        if name in spec.params and any(isinstance(p, Partial) for p in pl.values()):
            errs.append(f"{plan.site}: parameter {name} is Partial on an axis; a parameter is "
                        "Shard(dim) or Replicate() (Partial is for data inputs)")
    mb = plan.microbatches
    if mb is not None:
        if mb.dim not in sizes:
            errs.append(f"{plan.site}: microbatches split dim {mb.dim!r}, which no data input has")
        else:
            for name, dat in spec.data.items():
                if mb.dim not in [d.name for d in dat.dims]:
                    continue
                n = sizes[mb.dim]
                for a in plan.mesh:
                    p = plan.placements.get(name, {}).get(a)
                    if isinstance(p, Shard) and p.dim == mb.dim:
                        n //= plan.mesh[a]
                if n % mb.k:
                    errs.append(f"{plan.site}: {name} dim {mb.dim} has {n} per rank, which "
                                f"microbatches({mb.k}) does not divide; change K or the size")
    return errs


def _gather_param(plan: Plan, k: str, new: Tensor, local: Tensor, shard: Tensor) -> Tensor:
    """The updated optimizer shard of ``k`` brought back to the parameter's placement."""
    if shard is local:
        return new
    gather = plan.gatherer(k)
    if gather is None:
        raise PlanError(f"{plan.site}: the optimizer of {k} runs on {shard.describe()} but the "
                        f"parameter is {local.describe()}; give gather_params (e.g. all_gather "
                        "over dp) to rebuild it")
    out = gather(k, new)
    if not isinstance(out, Tensor) or out.term.dims != local.term.dims:
        got = out.describe() if isinstance(out, Tensor) else repr(out)
        raise PlanError(f"{plan.site}: gather_params for {k} returned {got}; it must have the "
                        f"parameter's local type {local.describe()}")
    return out


def _present_grad(g: Tensor | GradOrNone) -> Tensor:
    """A gradient as a value: ``present * g`` for a :class:`GradOrNone` (None reads as 0)."""
    return g.present * g.grad if isinstance(g, GradOrNone) else g


def _scaled(g: Tensor | GradOrNone, coef: Tensor) -> Tensor | GradOrNone:
    """``g * coef`` (clipping), keeping a :class:`GradOrNone`'s presence."""
    if isinstance(g, GradOrNone):
        return GradOrNone(g.grad * coef, g.present)
    return g * coef


@dataclass(frozen=True)
class _OptimizerStart:
    """One parameter after the plan's ``optimizer_init``: the value the forward reads, the
    optimizer's shard, its state and step counter."""

    param: Tensor
    shard: Tensor
    state: dict[str, Tensor]
    counter: int | None


def _run_optimizer_init(plan: Plan, spec: Spec, opt: object, params: Mapping[str, Tensor]
                        ) -> dict[str, _OptimizerStart]:
    """Run ``plan.optimizer_init`` (zero-gradient steps before the iteration) on every
    parameter's optimizer shard; the updated shard is gathered back (``gather_params``) into the
    parameter the forward then reads."""
    mesh = plan.mesh.sizes
    out: dict[str, _OptimizerStart] = {}
    for k in spec.params:
        o = optimizer_for(opt, k)
        opl = plan.optimizer_placement(k)
        local = params[k]
        shard = local if opl == plan.placements.get(k, {}) else Tensor(
            lineage(spec.param_term(k), opl, mesh), plan.site, k)
        state = tensor_state(o, shard, {
            st: Tensor(lineage(_state_term(spec, st, dom, k), opl, mesh), plan.site)
            for st, dom in o.state().items()})
        new, state, counter = run_init(o, k, shard, state, first_counter(o), plan.optimizer_init)
        param = _gather_param(plan, k, new, local, shard)
        out[k] = _OptimizerStart(param, param if shard is local else new, state, counter)
    return out


def _held(plan: Plan, final: Mapping[str, Tensor | GradOrNone]) -> dict[str, Tensor]:
    """The gradients ``grad_norm_sq`` reads: with a pipeline, each exists only on the stages
    holding its parameter (``Pipeline.held_grads``)."""
    plain = {k: _present_grad(g) for k, g in final.items()}
    held = getattr(plan.schedule, "held_grads", None)
    return held(plain) if held is not None else plain


def trace_plan(plan: Plan, spec: Spec) -> tuple[Iteration, dict[str, PlacementMap]]:
    """Trace the plan's per-rank iteration (REGIONs lowered in the outputs).

    Returns:
        the iteration and, per output, its placement (the map its expected value goes through).

    Raises:
        PlanError: every placement problem at once, then trace-time shape errors.
    """
    ctx = TraceContext("plan", mesh=plan.axes)
    _record_dims(ctx, spec)
    errs = _plan_errors(plan, spec, ctx.sizes)
    if errs:
        raise PlanError("\n".join(errs))
    mesh = plan.mesh.sizes
    mb = plan.microbatches
    outputs: dict[str, Term] = {}
    kinds: dict[str, str] = {}
    where: dict[str, PlacementMap] = {}
    opt = plan.optimizer if plan.optimizer is not None else spec.optimizer
    with tracing(ctx):
        params = {k: Tensor(lineage(spec.param_term(k), plan.placements.get(k, {}), mesh),
                            plan.site, k) for k in spec.params}
        pre = _run_optimizer_init(plan, spec, opt, params) if plan.optimizer_init else {}
        params = {k: pre[k].param if k in pre else v for k, v in params.items()}
        data = {}
        for k in spec.data:
            x = lineage(spec.data_term(k), plan.placements.get(k, {}), mesh)
            if mb is not None and mb.dim in x.dim_names:
                dims = tuple(DimSpec(s.name, s.shards + ("mb",)) if s.name == mb.dim else s
                             for s in x.dims)
                x = term(Op.SHARD, (x,), (mb.dim, "mb"), dims)
            data[k] = Tensor(x, plan.site, k)
        if plan.schedule is not None:      # loop-carried gradient buffers (spec_lang.schedules)
            report, acc = plan.schedule.trace(plan, Params(params), data, list(spec.params))
            grads, rep = [t.term for t in acc], report.term
        else:
            out = plan.forward(Params(params), data)
            if isinstance(out, Loss):
                seed = _check_loss(out.backward, plan.site, PlanError, "Loss.backward")
                report = _check_loss(out.report, plan.site, PlanError, "Loss.report")
            else:
                seed = report = _check_loss(out, plan.site, PlanError, "the plan's forward")
            grads = grad(seed.term, [params[k].term for k in spec.params])
            rep = report.term
            if mb is not None:
                if mb.accum_dtype is not None:  # the buffer's dtype, for the precision lint
                    grads = [term(Op.CAST, (g,), (mb.accum_dtype,), g.dims) for g in grads]
                    for g in grads:
                        record_site(g, mb.site)
                grads = [term(Op.ALL_REDUCE, (g,), ("mb", "sum"), g.dims) for g in grads]
                rep = term(Op.ALL_REDUCE, (rep,), ("mb", "sum"), rep.dims)
        outputs["loss"], kinds["loss"] = rep, "loss"
        where["loss"] = {}
        sites = {"loss": report.site}
        final: dict[str, Tensor | GradOrNone] = {}
        shard: dict[str, Tensor] = {}
        for k, g in zip(spec.params, grads):
            opl = plan.optimizer_placement(k)
            if k in pre:
                shard[k] = pre[k].shard
            else:
                shard[k] = params[k] if opl == plan.placements.get(k, {}) else Tensor(
                    lineage(spec.param_term(k), opl, mesh), plan.site, k)
            gt = Tensor(g, plan.site, f"grad:{k}")
            r = plan.reducer(k)
            if r is not None:
                gt_in, gt = gt, r(k, gt)
                check = getattr(plan.schedule, "check_reduced", None)
                if check is not None:      # no pp collective on a one-stage gradient
                    check(k, gt_in, _present_grad(gt))
            # dims are named: their storage order carries no meaning (docs/dsl.md section 2)
            gv = gt.grad if isinstance(gt, GradOrNone) else gt
            if not isinstance(gv, Tensor) or sorted(gv.term.dims, key=repr) != sorted(
                    shard[k].term.dims, key=repr):
                got = gv.describe() if isinstance(gv, Tensor) else repr(gv)
                raise PlanError(f"{plan.site}: the gradient of {k} handed to the optimizer is "
                                f"{got}; it must have the optimizer's local type "
                                f"{shard[k].describe()} ({describe_placements(opl, mesh)}); fix "
                                "reduce_grads (or optimizer_placements)")
            final[k] = gt
            _mark(ctx, f"grad:{k}", _present_grad(gt))
            seen = _present_grad(gt)
            if k in plan.optimizer_owners:     # the gradient each block's owner steps with
                own = plan.optimizer_owners[k]
                own.check(k, shard[k], mesh, plan.site)
                seen = own.assemble(seen, seen, mesh[own.axis])
            outputs[f"grad:{k}"], kinds[f"grad:{k}"] = seen.term, "grad"
            gt = seen
            where[f"grad:{k}"] = opl
            sites[f"grad:{k}"] = gt.site if r is not None else plan.site
        if spec.clip_grad_norm is not None and spec.clip_groups is not None:
            # per-group clipping: grad_norm_sq returns {group: that group's squared norm}
            if plan.grad_norm_sq is None:
                raise PlanError(f"{plan.site}: the spec clips each of {list(spec.clip_groups)} "
                                "by its own norm; give Plan(grad_norm_sq=...) returning "
                                "{group: squared norm}")
            per = plan.grad_norm_sq(_held(plan, final))
            if not isinstance(per, Mapping) or sorted(per) != sorted(spec.clip_groups):
                raise PlanError(f"{plan.site}: grad_norm_sq must return one squared norm per "
                                f"clip group {sorted(spec.clip_groups)}, got {per!r}")
            max_norm = plan.clip_grad_norm if plan.clip_grad_norm is not None \
                else spec.clip_grad_norm
            for grp, names in spec.clip_groups.items():
                total = _check_loss(per[grp], plan.site, PlanError, "grad_norm_sq")
                _mark(ctx, f"grad_norm_sq:{grp}", total)
                outputs[f"grad_norm:{grp}"] = sqrt(total).term
                kinds[f"grad_norm:{grp}"] = "grad"
                where[f"grad_norm:{grp}"] = {}
                sites[f"grad_norm:{grp}"] = total.site
                coef = clip_coefficient(total, max_norm)
                final.update({k: _scaled(final[k], coef) for k in names})
        elif spec.clip_grad_norm is not None:
            if plan.grad_norm_sq is None:
                raise PlanError(f"{plan.site}: the spec clips gradients at global norm "
                                f"{spec.clip_grad_norm}; give Plan(grad_norm_sq=...) computing "
                                "the global squared norm from the local gradients")
            total = _check_loss(plan.grad_norm_sq(_held(plan, final)), plan.site, PlanError,
                                "grad_norm_sq")
            _mark(ctx, "grad_norm_sq", total)
            outputs["grad_norm"], kinds["grad_norm"] = sqrt(total).term, "grad"
            where["grad_norm"] = {}
            sites["grad_norm"] = total.site
            max_norm = plan.clip_grad_norm if plan.clip_grad_norm is not None \
                else spec.clip_grad_norm
            coef = clip_coefficient(total, max_norm)
            final = {k: _scaled(g, coef) for k, g in final.items()}
        elif plan.clip_grad_norm is not None:
            # the plan clips although the spec does not: model it (the prover then refutes it
            # whenever the norm exceeds the max norm), never drop it
            if plan.grad_norm_sq is None:
                raise PlanError(f"{plan.site}: Plan(clip_grad_norm={plan.clip_grad_norm}) clips "
                                "gradients but the spec does not clip; remove it, or give "
                                "Plan(grad_norm_sq=...) so the plan's clipping can be checked")
            total = _check_loss(plan.grad_norm_sq(_held(plan, final)), plan.site, PlanError,
                                "grad_norm_sq")
            coef = clip_coefficient(total, plan.clip_grad_norm)
            final = {k: _scaled(g, coef) for k, g in final.items()}
        for k in spec.params:
            opl = plan.optimizer_placement(k)
            o = optimizer_for(opt, k)
            if k in pre:
                state, counter = pre[k].state, pre[k].counter
            else:
                state = tensor_state(o, shard[k], {
                    st: Tensor(lineage(_state_term(spec, st, dom, k), opl, mesh), plan.site)
                    for st, dom in o.state().items()})
                counter = first_counter(o)
            new = apply_step(o, k, shard[k], final[k], state, counter)
            own = plan.optimizer_owners.get(k)
            for name, t in new.items():
                if own is not None and not name.startswith("step:"):
                    old = shard[k] if name == k else state[name.split(":", 1)[0]]
                    t = own.assemble(t, old, mesh[own.axis])
                elif name == k:
                    t = _gather_param(plan, k, t, params[k], shard[k])
                outputs[name], kinds[name] = t.term, ("param" if name == k else "state")
                where[name] = (plan.placements.get(k, {}) if name == k else
                               {} if name.startswith("step:") else opl)
    names = list(outputs)
    cuts, adjoints = _cut_terms(ctx)
    extra = list(cuts.values()) + list(adjoints.values())
    lowered_all = lower([outputs[n] for n in names] + extra)   # one call: shared nodes stay shared
    lowered, extra = lowered_all[:len(names)], lowered_all[len(names):]
    cuts = dict(zip(cuts, extra[:len(cuts)]))
    adjoints = dict(zip(adjoints, extra[len(cuts):]))
    if plan.schedule is not None:          # a stage-held parameter is read on its stage
        lowered = [plan.schedule.observe(n.split(":", 1)[-1], t) if kinds[n] != "loss"
                   and n.split(":", 1)[-1] in spec.params else t
                   for n, t in zip(names, lowered)]
    sites = {n: sites.get(n, plan.site) for n in names}
    return Iteration(dict(zip(names, lowered)), kinds, dict(ctx.sizes), sites, cuts=cuts,
                     adjoints=adjoints), where


_LAYER = re.compile(r"(?:^|:)((?:layers|blocks|h)\.\d+)\.")


def build_problem(spec: Spec, plan: Plan, *, path: str = "<memory>", sha256: str = ""
                  ) -> Problem:
    """Trace both sides and pair every plan output with its expected value.

    Raises:
        SpecError / PlanError: tracing errors; a spec output the plan does not produce.
    """
    from spec_lang.rng import collect

    from spec_lang.constants import collect_readings
    from spec_lang.partial import grouped_warnings

    # dropout calls (proofs/rng.py checks their streams); PartialSumWarnings grouped per site
    with collect() as rng_records, collect_readings() as readings, grouped_warnings():
        s = trace_spec(spec)
        p, where = trace_plan(plan, spec)
    mesh = plan.mesh.sizes
    goals = []
    for name, actual in p.outputs.items():
        if name not in s.outputs:
            raise PlanError(f"{plan.site}: the plan produces {name!r}, which the spec does not "
                            f"(plan optimizer state differs from the spec's?)")
        pl = where[name]
        m = _LAYER.search(name)
        goals.append(Goal(
            name=name, kind=p.kinds[name], expected=expected_through(s.outputs[name], pl, mesh),
            actual=actual, placement=describe_placements(pl, mesh), site=p.sites[name],
            layer=m.group(1) if m else None))
    missing = [n for n in s.outputs if n not in p.outputs]
    if missing:
        raise PlanError(f"{plan.site}: the plan does not produce spec outputs {missing[:6]}")
    sizes = {**s.sizes, **p.sizes, **plan.axes}
    order = {"loss": 0, "grad": 1, "param": 2, "state": 3}
    goals.sort(key=lambda g: order[g.kind])
    return Problem(
        path=path, source_sha256=sha256, binding=Binding(sizes), mesh=dict(plan.axes),
        goals=tuple(goals),
        assumptions=(DEFAULT_ASSUMPTIONS + tuple(spec.assumptions) + tuple(plan.assumptions)
                     + tuple(readings)),
        spec_outputs=dict(s.outputs), rng=tuple(rng_records), schedule=plan.schedule,
        cut_points=_cut_points(s, p))


def _cut_points(s: Iteration, p: Iteration) -> tuple[CutPoint, ...]:
    """Boundaries marked in both traces (forward values, then their adjoints), in plan order."""
    out = [CutPoint(name, s.cuts[name], t, "forward") for name, t in p.cuts.items()
           if name in s.cuts]
    out += [CutPoint(name, s.adjoints[name], g, "backward") for name, g in p.adjoints.items()
            if name in s.adjoints]
    return tuple(out)


