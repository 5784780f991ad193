"""``load(path) -> Problem``: the PyTorch front end end to end (``docs/torch.md``).

1. read the train file (:mod:`contract`); check the torch version (:mod:`version`);
2. capture the spec (no mesh) and the plan on 2-3 coordinates of every mesh axis, at probe
   sizes, and both once more at real sizes on meta tensors (:mod:`capture`, :mod:`world`);
3. pass 1, named dims: the spec's atoms, then the plan's seeded from them through each input's
   placements (a plan view that splits a spec atom re-runs the spec with it split);
4. names and real sizes (:mod:`naming`); the traces aligned for literals (:mod:`literals`);
5. pass 2, terms (:mod:`lower`): spec inputs are ``INPUT`` s, plan inputs their lineage
   (``SHARD`` per sharded axis);
6. one goal per plan output: the spec's value through the output's placement (a ``Partial``
   gradient is compared after the all-reduce its placement stands for). An output whose value
   could not be lowered is listed in ``Problem.unsupported`` (UNKNOWN, never EQUIVALENT).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from fractions import Fraction
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from spec_lang.errors import PlanError
from spec_lang.iteration import DEFAULT_ASSUMPTIONS
from spec_lang.problem import Goal, Problem
from spec_lang.term import Binding, DimSpec, Op, Term, term, varying_axes, walk
from spec_lang.torch_frontend import (  # noqa: F401 -- registers the rules
    rules_attention, rules_collectives, rules_contract, rules_elementwise, rules_index,
    rules_layout, rules_loss, rules_norm, rules_optim)
from spec_lang.torch_frontend.analysis import Analysis, analyse, node_site
from spec_lang.torch_frontend.capture import STATE_DOMAIN, Trace, probe_sizes
from spec_lang.torch_frontend.grad_snapshot import drop_grads_read_apart
from spec_lang.torch_frontend.leftover import (
    CHANGED, scalar_state_differences, zeros_for_one_sided_grad_left)
from spec_lang.torch_frontend.state_sites import declaration_site, state_site
from spec_lang.torch_frontend.tracedata import Job, Pool
from spec_lang.torch_frontend.contract import TrainFile, read_train_file
from spec_lang.torch_frontend.dims import Dims, DimsError, Refine
from spec_lang.torch_frontend.goal_text import (_data_assumptions, _missing_text,
                                                _placement_text, _producing_site, _style_of)
from spec_lang.torch_frontend.indexing import Idx, Pred
from spec_lang.torch_frontend.real_moves import check_real_moves
from spec_lang.torch_frontend.real_literals import unread_real_literals
from spec_lang.torch_frontend.real_ranks import check_real_ranks
from spec_lang.torch_frontend.new_groups import check_traces
from spec_lang.torch_frontend.backend_rejects import check_collectives
from spec_lang.torch_frontend.traced_ranks import (  # noqa: F401 -- public here too
    FULL_TRACE_RANKS, rank_coords, untraced_ranks)
from spec_lang.torch_frontend.literals import GraphMismatch, Traces
from spec_lang.torch_frontend.lower import Lowering, Opaque, lower_graph
from spec_lang.torch_frontend.naming import (
    Names, SizeMismatch, plan_namer, positional_names, real_shape_of, solve_real_sizes,
    spec_names, spec_namer, twin_keys)
from spec_lang.torch_frontend.values import TV
from spec_lang.torch_frontend.version import check_torch

__all__ = ["load", "Captured", "capture_all", "build_problem", "rank_coords", "untraced_ranks"]

_LAYER = re.compile(r"(?:^|:)((?:layers|blocks|h)\.\d+)\.")


@dataclass
class Captured:
    """All traces of one train file."""

    tf: TrainFile
    probe: dict[str, int]
    spec: Trace
    spec_real: Trace
    plans: list[Trace]            # plans[0] is the rank lowered (all coordinates 0)
    plan_real: Trace
    seconds: dict[str, float] = field(default_factory=dict)
    # pipelined (pp_frontend): the mesh the probe sizes were built for (tf.mesh is then the
    # mesh without the pipeline axis) and every stage's trace (their state is compared)
    probe_mesh: dict[str, int] | None = None
    stage_traces: list[Trace] | None = None
    # every other traced rank at the real sizes, in the order of plans[1:] (finding R4-7)
    plans_real: list[Trace] = field(default_factory=list)


def capture_all(tf: TrainFile, *, workers: int = 2) -> Captured:
    """Capture the spec and the plan's traces (module docstring, step 2), each in its own
    child process (:mod:`spec_lang.torch_frontend.tracedata`)."""
    import time
    t0 = time.monotonic()
    probe = probe_sizes(tf.sizes, tf.mesh)
    zero = {a: 0 for a in tf.mesh}
    coords = rank_coords(tf.mesh)
    src = tf.source
    # the plan at real sizes first: a pipelined step (pp_frontend) needs probe sizes that its
    # micro-batch count divides too; the other ranks' jobs start as soon as it is known
    with Pool(workers=workers) as pool:
        first = [pool.submit(Job(tf.path, tf.sizes, zero, src, tf.mesh)),
                 pool.submit(Job(tf.path, probe, None, src, state=False)),
                 pool.submit(Job(tf.path, tf.sizes, None, src))]
        plan_real = pool.result(first[0])
        reals = [pool.submit(Job(tf.path, tf.sizes, c, src, tf.mesh))  # (R4-7: every other rank
                 for c in coords if c != zero and plan_real.pp is None]  # at the real sizes too,
        ids = [pool.submit(Job(tf.path, probe, c, src, tf.mesh, state=False))  # started first:
               for c in coords if plan_real.pp is None] + reals   # the longer jobs, LPT order)
        spec, spec_real, *rest = [pool.result(i) for i in first[1:] + ids]
    if plan_real.pp is not None:
        from spec_lang.torch_frontend.pp_frontend import capture_pipelined
        pp = capture_pipelined(tf, plan_real, spec, spec_real, workers=workers)
        check_traces(tf.path, [plan_real, *pp["stages"], *pp["plans"]], pipelined=True)
        check_collectives(tf.path, [plan_real, *pp["stages"], *pp["plans"], *pp["plans_real"]])
        return Captured(pp["tf"], pp["probe"], pp["spec"], pp["spec_real"], pp["plans"],
                        pp["plan_real"], {"capture": time.monotonic() - t0}, pp["probe_mesh"],
                        pp["stages"], pp["plans_real"])
    plans, plans_real = rest[:len(coords)], rest[len(coords):]
    check_traces(tf.path, [plan_real, *rest])    # the same new_groups on every rank (issue 11)
    check_collectives(tf.path, [plan_real, *rest])      # what gloo raises on (R37a-2)
    return Captured(tf, probe, spec, spec_real, plans, plan_real,
                    {"capture": time.monotonic() - t0}, plans_real=plans_real)


def _mesh_factor(mesh: Mapping[str, int]) -> int:
    m = math.prod(mesh.values()) if mesh else 1
    return m * 2 if m % 2 else m


def _placeholders(gm: Any) -> list[Any]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _spec_seeds(tr: Trace, splits: Mapping[str, tuple[int, ...]]) -> Any:
    def seed(i: int, n: Any, d: Dims) -> list:
        role = tr.inputs[i]
        shape = tuple(int(s) for s in n.meta["val"].shape)
        lay = []
        for k, s in enumerate(shape):
            if s == 1:
                lay.append([])
                continue
            a = d.fresh(s, f"input {role.name} dim {k}")
            a.key = f"{role.name}#{k}"
            _apply_splits(d, a, splits)
            lay.append([a])
        return lay
    return seed


def _apply_splits(d: Dims, a: Any, splits: Mapping[str, tuple[int, ...]]) -> None:
    if a.key in splits:
        for p in d.split(a, splits[a.key], a.origin):
            _apply_splits(d, p, splits)


def _plan_seeds(tr: Trace, spec_an: Analysis, names: Names, spec_tr: Trace) -> Any:
    spec_ph = {r.name: n for r, n in zip(spec_tr.inputs, _placeholders(spec_an.gm))}
    axes = list(tr.mesh)

    def seed(i: int, n: Any, d: Dims) -> list:
        role = tr.inputs[i]
        where = f"input {role.name}"
        sp = spec_ph.get(role.name)
        if sp is None:
            raise DimsError(f"{where}: the plan has an input the single-device model does not")
        lay = [spec_an.dims.canon(dim) for dim in spec_an.layouts[sp]]
        shards: list[list[list[str]]] = [[[] for _ in dim] for dim in lay]
        strided: list[tuple[int, str]] = []
        for ax, pl in zip(axes, role.placements):
            if pl.startswith("S("):
                k = int(pl[2:-1])
                if not lay[k]:
                    raise DimsError(f"{where}: dim {k} of size 1 is sharded over {ax!r}")
                shards[k][0].append(ax)
            elif pl.startswith("SS("):
                # _StridedShard (FSDP2 over TP): the rank's block of the block the later axes
                # hold, i.e. the innermost shard (spec_lang.placement.StridedShard)
                strided.append((int(pl[3:-1].split(",")[0]), ax))
            elif pl != "R":
                raise DimsError(f"{where}: input placement {pl} over {ax!r}")
        for k, ax in strided:
            if not lay[k]:
                raise DimsError(f"{where}: dim {k} of size 1 is sharded over {ax!r}")
            shards[k][0].append(ax)
        shape = tuple(int(s) for s in n.meta["val"].shape)
        out = []
        for k, dim in enumerate(lay):
            atoms = []
            prod = 1
            for j, x in enumerate(dim):
                r = spec_an.dims.find(x)
                key = names.key_of[id(r)]
                div = math.prod(tr.mesh[a] for a in shards[k][j])
                if r.size % div:
                    raise DimsError(f"{where}: dim {k}'s named dim of size {r.size} is sharded "
                                    f"over {shards[k][j]} (size {div}), which does not divide it")
                atoms.append(d.fresh(r.size // div, where, (key, tuple(shards[k][j]))))
                prod *= r.size // div
            if prod != shape[k]:
                raise DimsError(f"{where}: local dim {k} has size {shape[k]}, its placement "
                                f"{role.placements} gives {prod} (uneven sharding is not "
                                "supported)")
            out.append(atoms)
        return out
    return seed


@dataclass
class Lowered:
    """Pass 2's results."""

    spec_an: Analysis
    plan_an: Analysis
    names: Names
    spec_out: dict[str, Any]
    plan_out: dict[str, Any]
    spec_ctx: Lowering
    plan_ctx: Lowering
    binding: Binding
    # buffers neither side's step writes: no goal (a true identity; finding R3-3)
    unchanged_buffers: frozenset[str] = frozenset()
    # literals no rule read on every traced rank or at both sizes: (kind "ranks" / "sizes",
    # why with the user's file:line) -- UNKNOWN (Traces.unread_rank_literals, real_literals)
    unread_literals: tuple[tuple[str, str], ...] = ()
    # plan dims no rule could name (``?uid``, sized at the real sizes but in no binding)
    unnamed: frozenset[str] = frozenset()


def _input_term(role: Any, specs: tuple[DimSpec, ...], dtype: str, rng: DimSpec | None) -> Term:
    if role.kind == "param":
        attrs = (role.name, "param", "real")
    elif role.kind == "state":
        attrs = (role.name, "state", STATE_DOMAIN.get(role.name.split(":", 1)[0], "real"))
    elif dtype == "torch.bool":
        attrs = (role.name, "data", "mask")
    elif "int" in dtype:
        if rng is None:
            return None  # type: ignore[return-value]
        attrs = (role.name, "data", "index", rng.name)
    else:
        attrs = (role.name, "data", "real")
    return term(Op.INPUT, (), attrs, specs)


def _spec_inputs(tr: Trace, an: Analysis, ctx: Lowering, namer: Any) -> list[Any]:
    vals = []
    for role, ph in zip(tr.inputs, _placeholders(an.gm)):
        lay = ctx.layout(ph)
        specs = tuple(x for dim in lay for x in dim)
        rng = an.index_range.get(ph)
        t = _input_term(role, specs, role.dtype, namer(rng) if rng is not None else None)
        if t is None:
            vals.append(Opaque("input", role.name, "an integer input used as no index"))
        elif t.attrs[2] == "index":
            vals.append(Idx(t, lay))
        elif t.attrs[2] == "mask":
            vals.append(Pred(t, lay))
        else:
            vals.append(TV(t, lay))
    return vals


def _plan_inputs(tr: Trace, an: Analysis, ctx: Lowering, spec_vals: Mapping[str, Any]) -> list:
    vals = []
    for role, ph in zip(tr.inputs, _placeholders(an.gm)):
        sv = spec_vals[role.name]
        if isinstance(sv, Opaque):
            vals.append(sv)
            continue
        lay = ctx.layout(ph)
        t = sv.base if isinstance(sv, Idx) else sv.term
        for dim in lay:            # each dim's shards, outermost first (its DimSpec order)
            for ds in dim:
                for ax in ds.shards:
                    cur = t.dim(ds.name)
                    new = DimSpec(cur.name, cur.shards + (ax,))
                    t = term(Op.SHARD, (t,), (cur.name, ax),
                             tuple(new if x.name == cur.name else x for x in t.dims))
        want = {x for dim in lay for x in dim}
        if set(t.dims) != want:
            # StridedShard order or nested axes: rebuild in the order the layout gives
            vals.append(Opaque("input", role.name, f"placement {role.placements} gives dims "
                               f"{sorted(map(str, t.dims))}, the local tensor "
                               f"{sorted(map(str, want))}"))
            continue
        vals.append(Idx(t, lay) if isinstance(sv, Idx) else
                    Pred(t, lay) if isinstance(sv, Pred) else TV(t, lay))
    return vals


def lower_all(cap: Captured) -> Lowered:
    """Passes 1 and 2 on the main spec and plan traces (module docstring, steps 3-5).

    Raises:
        PlanError: dims that cannot be named, graphs that differ across traces, sizes that do
            not fit; each names the user's line.
    """
    tf, probe = cap.tf, cap.probe
    mf = _mesh_factor(cap.probe_mesh or tf.mesh)
    path = tf.path
    plan_tr = cap.plans[0]
    try:
        spec_traces = Traces(cap.spec.gm, {}, {}, real=cap.spec_real.gm)
        pairs = list(zip(cap.plans[1:], cap.plans_real))    # other ranks, probe and real
        plan_traces = Traces(plan_tr.gm, plan_tr.coords, plan_tr.groups, real=cap.plan_real.gm,
                             real_groups=cap.plan_real.groups,
                             ranks=[(t.coords, t.gm, t.groups) for t in cap.plans[1:]],
                             real_ranks=[(t.coords, r.gm) for t, r in pairs])
        check_real_ranks(path, plan_tr.gm, cap.plan_real.gm,
                         [(t.coords, t.gm, r.gm) for t, r in pairs],
                         [(t.groups, r.groups) for t, r in pairs], cap.plan_real.groups)
    except GraphMismatch as e:
        raise PlanError(f"{e.site or f'{path}:1'}: {e}") from None
    rank_blocks = {}
    for (node, pth), rv in plan_traces.rank_refs.items():
        ref = node.args
        for q in pth[1:]:
            ref = ref[q]
        rank_blocks[ref] = rv.axis
    splits: dict[str, tuple[int, ...]] = {}
    for _round in range(6):
        sd = Dims()
        spec_an = analyse(cap.spec.gm, _spec_seeds(cap.spec, splits), sd, path)
        names = spec_names(spec_an, probe, mf)
        pd = Dims(axis_sizes=tf.mesh, twin_keys=twin_keys(spec_an, names))
        try:
            plan_an = analyse(plan_tr.gm, _plan_seeds(plan_tr, spec_an, names, cap.spec), pd,
                              path, groups=plan_tr.groups, rank_blocks=rank_blocks)
        except Refine as r:
            last = f"{r.where or f'{path}:1'}: cannot name the dims: a local view splits the " \
                   f"spec's dim {r.key} into {list(r.sizes)}"
            if r.key in splits:
                raise PlanError(last) from None
            splits[r.key] = r.sizes
            continue
        break
    else:
        raise PlanError(f"{last}, again after {len(splits)} refinements")
    s_namer = spec_namer(spec_an, names)
    chunked: set[str] | None = set() if plan_tr.pp else None
    p_namer = plan_namer(plan_an, names, chunked)
    try:
        real = solve_real_sizes([(spec_an, s_namer, cap.spec_real.gm, {}),
                                 (plan_an, _safe(p_namer), cap.plan_real.gm, tf.mesh)])
        for tr, an, nm in ((spec_traces, spec_an, s_namer), (plan_traces, plan_an,
                                                              _safe(p_namer))):
            check_real_moves(tr, path, real_shape_of(an, nm, real, tf.mesh))   # R24-1
    except (GraphMismatch, SizeMismatch, KeyError) as e:
        raise PlanError(e if re.match(r"\S+\.py:\d+\b", str(e)) else f"{path}:1: {e}") from None
    for tr in (spec_traces, plan_traces):
        tr.probe_sizes = dict(names.probe_size)
        tr.real_sizes = dict(real)
        tr.axis_sizes = dict(tf.mesh)
    spec_ctx = Lowering(spec_an, s_namer, spec_traces.scalar, spec_traces.axis, path,
                        traces=spec_traces)
    plan_ctx = Lowering(plan_an, _safe(p_namer), plan_traces.scalar, plan_traces.axis,
                        path, traces=plan_traces, sited=set())
    copies = {names.name_of_key[k]: names.name_of_key[k[:-1]] for k in names.name_of_key
              if k.endswith("'") and k[:-1] in names.name_of_key}
    spec_ctx.copy_base = plan_ctx.copy_base = copies
    spec_in = _spec_inputs(cap.spec, spec_an, spec_ctx, s_namer)
    spec_env = lower_graph(spec_ctx, spec_in)
    spec_vals = {r.name: v for r, v in zip(cap.spec.inputs, spec_in)}
    plan_in = _plan_inputs(plan_tr, plan_an, plan_ctx, spec_vals)
    plan_env = lower_graph(plan_ctx, plan_in)
    spec_out = _outputs(cap.spec, spec_an, spec_env)
    plan_out = _outputs(plan_tr, plan_an, plan_env)
    # a pipelined plan's outputs named as their stage names them (a tied copy, a buffer on
    # every stage): compared with the spec output of the same tensor (pp_merge)
    if plan_tr.pp:                 # micro-batch sums as ALL_REDUCE over mb (pp_fold)
        from spec_lang.torch_frontend.pp_frontend import fold_outputs
        plan_out = fold_outputs(plan_out, plan_tr, chunked)
    spec_name = dict((plan_tr.pp or {}).get("spec_name", {}))
    spec_out.update({n: spec_out[m] for n, m in spec_name.items() if n != m and m in spec_out})
    plan_out = positional_names(spec_out, plan_out, names.probe_size, plan_ctx.same_size)
    sizes = dict(real)
    for ctx in (spec_ctx, plan_ctx):
        for name in ctx.same_size:
            base = name
            while base in ctx.same_size:
                base = ctx.same_size[base]
            sizes[name] = real[base]
    binding = Binding({**{k: v for k, v in sizes.items() if not k.startswith("?")},
                       **tf.mesh})
    plan_vals = {r.name: v for r, v in zip(plan_tr.inputs, plan_in)}
    # a lowered output that *is* its input's value object was never written (every in-place
    # write through an alias replaces it: lower._write_back)
    unchanged = frozenset(
        n for n, (_, v, _) in spec_out.items() if n.startswith("buffer:")
        and v is spec_vals.get(spec_name.get(n, n)) and n in plan_out
        and plan_out[n][1] is plan_vals.get(spec_name.get(n, n)))
    unread = tuple(("ranks", f"{why} ({node_site(x, path)}): the lowered program is rank "
                    f"{plan_tr.coords}'s there") for x, why in plan_traces.unread_rank_literals())
    unread += tuple(("sizes", f"{why} ({node_site(x, path)})")
                    for t, c in ((spec_traces, spec_ctx), (plan_traces, plan_ctx))
                    for x, why in unread_real_literals(t, c.opaque_when_lowered))
    return Lowered(spec_an, plan_an, names, spec_out, plan_out, spec_ctx, plan_ctx, binding,
                   unchanged, unread, frozenset(k for k in sizes if k.startswith("?")))


def _safe(namer: Any) -> Any:
    def f(a: Any) -> DimSpec:
        try:
            return namer(a)
        except KeyError:
            return DimSpec(f"?{a.uid}")
    return f


def _outputs(tr: Trace, an: Analysis, env: Mapping[Any, Any]) -> dict[str, Any]:
    out_node = next(n for n in an.gm.graph.nodes if n.op == "output")
    vals = env[out_node]
    flat = vals[0] if isinstance(vals, (list, tuple)) and len(vals) == 1 \
        and isinstance(vals[0], (list, tuple)) else vals
    nodes = out_node.args[0]
    nodes = nodes[0] if isinstance(nodes, (list, tuple)) and len(nodes) == 1 \
        and isinstance(nodes[0], (list, tuple)) else nodes
    res = {}
    for role, v, nd in zip(tr.outputs, flat, nodes):
        res[role.name] = (role, v, nd)
    return res


def _through(t: Term, layout: tuple, placements: tuple[str, ...], axes: list[str]) -> Term:
    """The spec value ``t`` as rank-local through ``placements`` (one per world axis): a
    ``SHARD`` of the outermost named dim of torch dim ``k`` per ``S(k)`` in mesh order, then one
    per ``SS(k)`` (``_StridedShard``: the innermost block, as FSDP2 over TP stores it)."""
    order = [(ax, pl[2:-1]) for ax, pl in zip(axes, placements) if pl.startswith("S(")]
    order += [(ax, pl[3:-1].split(",")[0]) for ax, pl in zip(axes, placements)
              if pl.startswith("SS(")]
    for ax, k in order:     # a value without the dim is constant along it (R46c-3: the
        ds = layout[int(k)][0]      # zeros zero_grad(set_to_none=False) keeps): its own shard
        if ds.name in t.dim_names:
            cur = t.dim(ds.name)
            new = DimSpec(cur.name, cur.shards + (ax,))
            t = term(Op.SHARD, (t,), (cur.name, ax),
                     tuple(new if x.name == cur.name else x for x in t.dims))
    return t


def build_problem(cap: Captured, low: Lowered) -> Problem:
    """Goals from the lowered outputs (module docstring, step 6)."""
    tf = cap.tf
    axes = list(tf.mesh)
    goals: list[Goal] = []
    unsupported: list[tuple[str, str]] = []
    why_ranks = untraced_ranks(tf.mesh)
    src = tf.source.decode("utf-8", errors="replace")
    if why_ranks is not None:
        unsupported.append(("ranks", f"{why_ranks} (MESH at "
                                     f"{declaration_site(tf.path, src, 'MESH')})"))
    # hyperparameters and training flags the step leaves (findings R4-3, R4-4): UNKNOWN, with
    # the line of the user's file that changes the state (issue 12 item 2)
    plans_state = cap.plans if cap.stage_traces is None else [
        t for t in cap.stage_traces if t.sizes != tf.sizes]
    reals_state = [cap.plan_real, *cap.plans_real] if cap.stage_traces is None else [
        t for t in cap.stage_traces if t.sizes == tf.sizes]
    for sp, pls in ((cap.spec, plans_state), (cap.spec_real, reals_state)):
        for pt in pls:
            for why in scalar_state_differences(sp.after, pt.after)[:1]:
                entry = ("state", f"{why} (rank {pt.coords}; {state_site(tf.path, src, why)})")
                if entry not in unsupported:     # (rank 0 at probe and at real sizes)
                    unsupported.append(entry)
    unsupported += low.unread_literals[:3]
    notes: list[str] = []
    order = {"loss": 0, "grad": 1, "param": 2, "state": 3}
    # a gradient left set by one step only: compared with zeros (findings R4-2, R6-9)
    changed = any(k.startswith(CHANGED) for t in (cap.spec, cap.spec_real, cap.plan_real,
                                                  *cap.plans, *cap.plans_real,
                                                  *(cap.stage_traces or ()))
                  for k in t.after)
    spec_out, plan_out, zero_notes = zeros_for_one_sided_grad_left(low.spec_out, low.plan_out,
                                                                   tf.path, changed)
    notes += zero_notes
    spec_out, plan_out = drop_grads_read_apart(cap, spec_out, plan_out, unsupported)
    for name, (role, pv, pnode) in plan_out.items():
        if name in low.unchanged_buffers:
            continue
        if name not in spec_out:
            raise PlanError(f"{tf.path}:1: the parallel step produces {name!r}, which the "
                            "single-device step does not")
        _, sv, _ = spec_out[name]
        bad = sv if isinstance(sv, Opaque) else pv if isinstance(pv, Opaque) else None
        if bad is not None:
            unsupported.append((name, bad.reason()))
            continue
        actual = pv.term
        pls = role.placements
        for ax, pl in zip(axes, pls):
            if pl.startswith("P("):
                op = pl[2:-1]
                if op not in ("sum", "avg"):
                    unsupported.append((name, f"a {pl} gradient over {ax!r}"))
                    break
                actual = term(Op.ALL_REDUCE, (actual,), (ax, "sum"), actual.dims)
                if op == "avg":
                    from spec_lang.torch_frontend.values import ew
                    actual = ew(Op.MUL, ew(Op.POW, term(Op.AXIS_SIZE, (), (ax,), ()),
                                           attrs=(Fraction(-1),)), actual)
        else:
            if role.kind == "loss":
                vary = varying_axes(actual)
                if vary:
                    notes.append(f"the returned loss varies over {sorted(vary)} (each rank's "
                                 "loss on its shard of the batch); it is not compared, the "
                                 "gradients and the updated parameters are")
                    continue
            expected = _through(sv.term, sv.dims, tuple(p if not p.startswith("P(") else "R"
                                                         for p in pls), axes)
            m = _LAYER.search(name)
            placement = _placement_text(axes, pls)
            how = _style_of(cap.plans[0].styles, role.param)
            if cap.plans[0].pp:
                from spec_lang.torch_frontend.pp_frontend import pp_placement
                how = "; ".join(x for x in (pp_placement(cap.plans[0], name), how) if x)
            goals.append(Goal(name=name, kind=role.kind, expected=expected, actual=actual,
                              placement=placement + (f"; {how}" if how else ""),
                              site=_producing_site(pnode, tf.path),
                              layer=m.group(1) if m else None))
    goals = _without_unnamed_dims(goals, low, unsupported)
    missing = [n for n in spec_out if n not in plan_out]
    if missing:
        raise PlanError(_missing_text(tf, missing))
    goals.sort(key=lambda g: order[g.kind])
    from spec_lang.torch_frontend.pp_frontend import pp_assumptions
    assumptions = DEFAULT_ASSUMPTIONS + tuple(_data_assumptions(cap)) + tuple(notes) + tuple(
        pp_assumptions(cap.plan_real)) + (
        "buffers (rotary tables, masks) are inputs: the proof holds for every buffer value; "
        "a buffer the step updates is compared as it leaves the step",
        "the step is verified as it runs when traced on meta tensors under a fake process group "
        "(one process per rank, RANK / LOCAL_RANK set), with the tracer's hooks in place (a "
        "global optimizer step pre-hook, clip_grad_norm_ and clip_grads_with_norm_ wrapped, "
        "Tensor.data guarded): code that branches on the device, the backend, tensor values, "
        "type(t) (FakeTensor) or torch's private hook registries takes the branch it takes there",
        "state the step leaves is compared: parameters, buffers, gradients and optimizer state as "
        "goals; every attribute of the modules, the parameters, the optimizer and the DeviceMesh, "
        "the globals of the train file and the modules next to it, torch's global hooks, the "
        "default dtype, the environment, builtins, the globals of every module loaded before the "
        "step (torch's by the code they name, other objects by identity and own attributes, not "
        "what those hold), torch's saved-tensor hooks and mode stacks, the decimal context, the "
        "threads, finalizers, exit callbacks, codec registry (an audit hook added: UNKNOWN) and "
        "CPU and numpy generators by fingerprint (torch's own objects by their public plain "
        "attributes); Python state both steps change alike is UNKNOWN (only one step is traced); a "
        "Python hook on a parameter or on its AccumulateGrad node there before the step or left by "
        "it is refused; hooks registered from C++, state outside this process (files) and "
        "Python's random generator are not compared",
    )
    return Problem(path=tf.path, source_sha256=tf.sha256, binding=low.binding,
                   mesh=dict(tf.mesh), goals=tuple(goals), assumptions=assumptions,
                   spec_outputs={k: v[1].term for k, v in low.spec_out.items()
                                 if isinstance(v[1], TV)},
                   unsupported=tuple(unsupported), frontend="torch")


def _without_unnamed_dims(goals: list[Goal], low: Lowered,
                          unsupported: list[tuple[str, str]]) -> list[Goal]:
    """The goals whose terms have no dim the plan's namer could not name (R33-3: a ``cat`` of
    two gradients along a dim that is a sum of named dims; the kernel refused the whole problem
    with "dim ?12 is not a dim of the binding"); each other goal an ``unsupported`` entry
    naming the first op of the plan whose value has such a dim."""
    if not low.unnamed:
        return goals
    bad: set[int] = set()
    for t in walk([x for g in goals for x in (g.expected, g.actual)]):
        if any(d.name in low.unnamed for d in t.dims) or any(
                isinstance(a, str) and a in low.unnamed for a in t.attrs) or any(
                    c.uid in bad for c in t.args):
            bad.add(t.uid)
    first = next((f"{n.target} at {low.plan_ctx.site(n)}" for n, v in low.plan_ctx.env.items()
                  if isinstance(v, TV) and any(d.name in low.unnamed for d in v.term.dims)),
                 "an op of the plan")
    for g in goals:
        if g.actual.uid in bad or g.expected.uid in bad:
            unsupported.append((g.name, f"{first}: a dim of its value is no product of the "
                                        "model's named dims (a cat or a reshape across dims of "
                                        "different sizes), so it cannot be sized"))
    return [g for g in goals if g.actual.uid not in bad and g.expected.uid not in bad]


def load(path: str | Path, source: bytes | None = None) -> Problem:
    """The :class:`~spec_lang.problem.Problem` of a ``prove --torch`` train file.

    ``source``: the file's bytes as the caller read and hashed them (``None``: read ``path``).
    Called in :mod:`proofs.isolation`'s tracing child, never in the process that decides.

    Raises:
        PlanError: bad input (a malformed file, an unsupported torch, dims or sizes that cannot
            be named), one line starting with ``file:line:``.
    """
    check_torch(torch.__version__)
    tf = read_train_file(path, source)
    folder = str(Path(tf.path).resolve().parent)
    sys.path.insert(0, folder)
    try:
        cap = capture_all(tf)
        low = lower_all(cap)
        return build_problem(cap, low)
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
