"""Capture of every stage of a pipelined train file and their composition (issue 11;
``docs/torch.md``, "Pipelining").

A rank whose traced step built a ``PipelineStage`` (:mod:`pp_capture`) names the mesh axis of
its stage group, the pipeline axis ``pp``. Every stage is traced, in stage order (a stage's
input metadata is the output the previous stage's trace recorded), at every coordinate of the
other axes that :func:`~spec_lang.torch_frontend.frontend.rank_coords` traces (probe sizes) and
at the zero coordinate (real sizes). The stages of one coordinate are composed
(:func:`~spec_lang.torch_frontend.pp_merge.merge_stages`) into one plan on the mesh without the
pipeline axis, which the front end lowers, aligns across the other axes and proves as any
plan. Ranks of different stages are never aligned against each other.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.leftover import CHANGED
from spec_lang.torch_frontend.pp_data_parallel import STAND_IN_ASSUMPTION, STAND_IN_MARK
from spec_lang.torch_frontend.pp_fold import MB, fold_microbatches
from spec_lang.torch_frontend.pp_merge import merge_stages
from spec_lang.torch_frontend.tracedata import Job, run_jobs

__all__ = ["capture_pipelined", "pp_assumptions"]


def capture_pipelined(tf: Any, real0: Any, spec0: Any, spec_real: Any, *, workers: int = 2
                      ) -> dict[str, Any]:
    """The stage traces and their compositions.

    ``real0``: rank 0 traced at real sizes (it built a stage); ``spec0``: the spec traced at
    the probe sizes of the mesh (traced again when the micro-batch count changes them: the
    probe sizes are multiples of every mesh axis and of the micro-batch count); ``spec_real``:
    the spec traced at the real sizes.

    Returns:
        ``{"tf": tf on the mesh without the pipeline axis and with ``mb``, "probe", "spec",
        "spec_real", "plans": composed plans (the zero coordinate first), "plan_real": the
        composed plan at real sizes, "plans_real": the other coordinates' composed plans at
        real sizes (in the order of ``plans[1:]``), "stages": every stage trace (for the state comparisons),
        "probe_mesh": the mesh the probe sizes are built for}``.

    Raises:
        PlanError: a stage group that is not one mesh axis, a stage index other than the pp
            coordinate, or what :func:`merge_stages` refuses.
    """
    from spec_lang.torch_frontend.capture import probe_sizes
    from spec_lang.torch_frontend.frontend import rank_coords

    pp = real0.pp
    axis = pp.get("axis")
    if axis is None or axis not in tf.mesh:
        raise PlanError(f"{tf.path}:1: the PipelineStage's group is not the group of one mesh "
                        f"axis of MESH {dict(tf.mesh)}; pass group=mesh[<pp axis>].get_group()")
    n = tf.mesh[axis]
    if pp.get("n_stages") != n:
        raise PlanError(f"{tf.path}:1: {pp.get('n_stages')} pipeline stages on the {axis!r} axis "
                        f"of size {n}: one stage per rank of the axis is supported")
    others = {a: k for a, k in tf.mesh.items() if a != axis}
    ocoords = rank_coords(others)
    zero = {a: 0 for a in others}
    src = tf.source
    n_mb = pp.get("n_microbatches") or 1
    if MB in tf.mesh:
        raise PlanError(f"{tf.path}:1: a mesh axis named {MB!r} is reserved for the micro-batches "
                        "of a pipelined step")
    probe_mesh = {**tf.mesh, MB: n_mb}
    probe = probe_sizes(tf.sizes, probe_mesh)
    spec = (spec0 if probe == spec0.sizes else
            run_jobs([Job(tf.path, probe, None, src, state=False)], workers=workers)[0])
    # stage -> [probe traces per coordinate of the other axes..., the zero coordinate's real
    # trace, the other coordinates' real traces...] (R4-7: every rank at the real sizes too)
    entries = [(oc, probe) for oc in ocoords] + [(zero, tf.sizes)] + [
        (oc, tf.sizes) for oc in ocoords if oc != zero]
    n_probe = len(ocoords)
    by_stage: list[list[Any]] = []
    for s in range(n):
        jobs, reuse = [], {}
        for i, (oc, sizes) in enumerate(entries):
            c = {axis: s, **oc}
            if s == 0 and i == n_probe:
                reuse[i] = real0
                continue
            prev = None if s == 0 else by_stage[s - 1][i].pp["out_meta"]
            jobs.append((i, Job(tf.path, sizes, c, src, tf.mesh, pp_in=prev, cpu=True,
                                state=i >= n_probe)))   # (the state at the real sizes)
        got = run_jobs([j for _, j in jobs], workers=workers) if jobs else []
        row: list[Any] = [None] * len(entries)
        for (i, _), tr in zip(jobs, got):
            row[i] = tr
        for i, tr in reuse.items():
            row[i] = tr
        for tr in row:
            if tr.pp is None or tr.pp.get("stage") != s:
                raise PlanError(f"{tf.path}:1: the rank at {tr.coords} runs pipeline stage "
                                f"{None if tr.pp is None else tr.pp.get('stage')}; prove "
                                f"--torch expects stage = the {axis!r} coordinate ({s})")
        by_stage.append(row)
    for i in range(len(entries)):
        _split_params_lists(spec_real if i >= n_probe else spec,
                            [by_stage[s][i] for s in range(n)], spec.tied)
    merged = [merge_stages([by_stage[s][i] for s in range(n)], pp_axis=axis,
                           spec_tied=spec.tied, path=tf.path) for i in range(len(entries))]
    return {"tf": dataclasses.replace(tf, mesh={**others, MB: n_mb}), "plans": merged[:n_probe],
            "plan_real": merged[n_probe], "plans_real": merged[n_probe + 1:],
            "stages": [t for row in by_stage for t in row],
            "axis": axis, "probe": probe, "spec": spec, "spec_real": spec_real,
            "probe_mesh": probe_mesh}


_PARAMS = re.compile(r"param_groups\[\d+\]\.params")


def _split_params_lists(spec: Any, stages: Sequence[Any], tied: Any) -> None:
    """Each stage's optimizer holds its stage's parameters: a ``param_groups[i].params`` list
    is compared as the set of the stages' lists joined (a tied copy once, under any of its
    names; no name twice in a list) against the single-device step's; when they agree, each
    stage's entry is set to the spec's (so the state comparison passes), else it is left to
    differ (UNKNOWN). The order of a group's parameters is not compared across stages."""
    rep = {}
    for first, al in tied.items():
        for a in (first, *al):
            rep[a] = min((first, *al))

    def names(v: str | None) -> list[str] | None:
        if v is None or not (v.startswith("[") and v.endswith("]")):
            return None
        return [rep.get(x.strip(), x.strip()) for x in v[1:-1].split(",") if x.strip()]

    for k, want in spec.after.items():
        if not _PARAMS.fullmatch(k.removeprefix(CHANGED)):
            continue
        lists = [names(tr.after.get(k)) for tr in stages]
        spec_list = names(want)
        if spec_list is None or any(x is None for x in lists):
            continue
        joined = sorted({x for xs in lists for x in xs})   # a tied copy once
        if joined == sorted(set(spec_list)) and len(spec_list) == len(set(spec_list)) and all(
                len(xs) == len(set(xs)) for xs in lists):
            for tr in stages:
                tr.after[k] = want


def fold_outputs(plan_out: dict[str, Any], plan: Any, chunked: set[str] | None
                 ) -> dict[str, Any]:
    """The composed plan's outputs with their micro-batch sums folded (:mod:`pp_fold`)."""
    from spec_lang.torch_frontend.values import TV

    n = plan.pp["stages"][0]["n_microbatches"]
    if not chunked or n <= 1:
        return plan_out
    vals = {k: v[1].term for k, v in plan_out.items() if isinstance(v[1], TV)}
    folded = fold_microbatches(vals, n, chunked)
    # an output whose term did not change keeps its value object (an unchanged buffer is
    # recognised by identity: frontend.lower_all)
    return {k: (r, TV(folded[k], v.dims), nd) if k in folded and folded[k] is not v.term
            else (r, v, nd) for k, (r, v, nd) in plan_out.items()}


def pp_placement(plan: Any, name: str) -> str:
    """Where a pipelined plan's output lives: its stage, and for a copy of a weight several
    stages hold (tied under two names, or one layer applied at two depths) the other stages
    holding the same spec tensor (whose gradients the plan must sum over the pipeline axis)."""
    pp = plan.pp or {}
    stage_of, spec_name = pp.get("stage_of") or {}, pp.get("spec_name") or {}
    if name not in stage_of:
        return ""
    s, ax = stage_of[name], pp["axis"]
    out = f"pipeline stage {s} of {pp['n_stages']} ({ax}={s})"
    if name.startswith("buffer:"):
        return out
    mine = spec_name.get(name, name).split(":", 1)[-1]
    others = sorted({(t, n.split(":", 1)[-1]) for n, t in stage_of.items()
                     if t != s and spec_name.get(n, n).split(":", 1)[-1] == mine
                     and not n.startswith("buffer:")})
    if others:
        where = ", ".join(f"{n} on stage {t}" for t, n in others)
        own = name.split(":", 1)[-1].split("@")[0]
        what = "a tied weight" if any(n.split("@")[0] != own for _, n in others) \
            else "a weight other stages hold too"
        out += (f"; a copy of {what} (also {where}): each stage's gradient must be "
                f"summed over {ax!r} and every copy updated alike")
    return out


def pp_assumptions(plan: Any) -> list[str]:
    """What a pipelined verdict assumes, in words."""
    pp = plan.pp or {}
    st = pp.get("stages") or []
    if not st:
        return []
    ev = "; ".join(f"stage {i}: {' '.join(x['events'])}" for i, x in enumerate(st))
    return [
        f"pipeline: {st[0]['schedule']} with {st[0]['n_microbatches']} micro-batches over "
        f"{pp['n_stages']} stages on {pp['axis']!r}, composed: the k-th send from a stage to "
        "another is the k-th receive there (FIFO per pair, as gloo and NCCL deliver), a "
        "transfer is the identity over the reals; executed order " + ev,
        "pipeline stage metadata inferred as torch infers it (DYNAMIC: the vote's result "
        "without user metadata): its extra forward per stage and extra loss_fn call on the "
        "last stage are traced, on micro-batch 0's arguments (first stage) or on received "
        "metadata buffers whose values are unknown (a value read from one is not proved); a "
        "received activation requires grad as the previous stage's traced output does; the "
        "stages traced on fake cpu tensors; every parameter, buffer and batch entry a stage "
        "holds (a tied weight, a layer applied at two depths, the batch) is that stage's own "
        "copy, equal to the spec's at the start of the step; a receive writes its buffer in "
        "place; the micro-batches' sums are all-reduces over the micro-batch axis "
        "'mb' (an exact rewriting: docs/torch.md, 'Pipelining')",
    ] + ([STAND_IN_ASSUMPTION] if any(e.endswith(STAND_IN_MARK) for x in st
                                     for e in x["events"]) else [])
