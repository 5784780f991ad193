"""The data form of a :class:`spec_lang.problem.Problem`: what a traced plan file sends back.

A plan file is user code. ``prove`` and the checker's re-trace run it in a separate interpreter
(:mod:`proofs.isolation`), and only this JSON document comes back (issue 10, family 6). It is
parsed strictly (:func:`parse_problem_data`): a malformed document is a one-line
:class:`ProblemDataError`, never a verdict. Part of the checker's trusted base.

Layout (``format`` ``"shardproof-problem"``, ``version`` 1)::

    {"format", "version", "frontend": "dsl" | "torch",
     "binding": {dim or axis: size}, "mesh": [[axis, size], ...]   (mesh order),
     "nodes": [[op, [args], [attrs], [[dim, [shards]], ...]], ...]  (proofs/kernel.py rows),
     "goals": [{"name", "kind", "expected": id, "actual": id, "placement", "site", "layer"}],
     "assumptions": [text], "spec_outputs": [[name, id], ...],
     "cut_points": [{"name", "spec": id, "plan": id, "kind"}],
     "rng": [{"side", "name", "p": {"q": ...}, "dims": [[dim, [shards]], ...],
              "stream": null | {"seed", "fork": [axes], "label"}, "stream_index", "order",
              "spec_input": id, "mask": id, "site", "unmodelled", "stage", "stage_axis"}],
     "schedule": null | {"kind": "pipeline", "name", "microbatches", "chunks", "pp", "axis",
                         "stages": [[event, ...], ...], "holders": {param: [virtual stage]}}
                      | {"kind": "accumulation", "microbatches", "events": [event, ...],
                         "buckets": [[name or prefix, [event, ...]], ...]},
     "unsupported": [[output name, reason], ...]   (outputs the front end could not lower:
                                                    the problem is never EQUIVALENT),
     "seconds": {phase: decimal string},   (the tracer's own timings, information only)
     "sites": {"strings": ["file:line", ...], "nodes": [[node id, string index], ...]}}
                                  (optional, information only: where the user built each node)

An event is ``{"kind", "mb", "chunk", "factor": null | {"q"}, "axis", "op", "accumulate",
"note", "site"}`` (:class:`spec_lang.schedules.Event`). Terms are one hash-consed node table in
the order the tracer created them (children first), so the terms rebuilt by :func:`to_problem`
are created in the same relative order. The dropout records and the schedule come back as the
data classes :class:`RngRecord`, :class:`PipelineRecord` and :class:`AccumulationRecord`, which
offer what :mod:`proofs.rng` and :func:`proofs.counterexample.schedule_context` read.

``sites`` (issue 12 item 2) is the ``file:line`` where the user built each node that has one
(:func:`spec_lang.tensor.site_of`), for messages only: ``prove``'s :func:`to_problem` records
them so that ``site_of`` answers in the prover's process too (``proofs/first_difference.py``
names where an open goal's two sides stop matching). No verdict, proof or checker decision
reads them: a document with forged sites decides exactly as one without
(``tests/proofs/test_first_difference.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from proofs.kernel import (
    OPS, DimRef, KernelError, KernelMalformed, NodeTable, canonical_json, check_sizes,
    decode_attr, encode_attr, paused_gc, typecheck,
)

__all__ = ["FORMAT", "VERSION", "FRONTENDS", "ProblemDataError", "ProblemData", "StreamRecord",
           "RngRecord", "PipelineRecord", "AccumulationRecord", "problem_to_data",
           "parse_problem_data", "to_problem"]

FORMAT = "shardproof-problem"
VERSION = 1
FRONTENDS = ("dsl", "torch")  # the front ends of proofs/isolation.py
GOAL_KEYS = {"name", "kind", "expected", "actual", "placement", "site", "layer"}
RNG_KEYS = {"side", "name", "p", "dims", "stream", "stream_index", "order", "spec_input", "mask",
            "site", "unmodelled", "stage", "stage_axis"}
EVENT_KEYS = {"kind", "mb", "chunk", "factor", "axis", "op", "accumulate", "note", "site"}
TOP_KEYS = {"format", "version", "frontend", "binding", "mesh", "nodes", "goals", "assumptions",
            "spec_outputs", "cut_points", "rng", "schedule", "unsupported", "seconds"}
OPTIONAL_KEYS = {"sites"}        # information only (the module docstring)
MAX_SITE_CHARS = 4096            # a longer "file:line" is cut to this length


class ProblemDataError(ValueError):
    """The traced data is not of this format (one line saying where)."""


# -- the records that replace tracing objects ----------------------------------------------------
@dataclass(frozen=True)
class StreamRecord:
    """An :class:`spec_lang.rng.RngStream` as data: ``seed``, ``fork`` axes and ``label``."""

    seed: int
    fork: tuple[str, ...]
    label: str


@dataclass(frozen=True)
class RngRecord:
    """A :class:`spec_lang.rng.DropoutRecord` as data (same fields; ``stream`` a
    :class:`StreamRecord`, the terms rebuilt)."""

    side: str
    name: str
    p: Fraction
    dims: tuple[Any, ...]
    stream: StreamRecord | None
    stream_index: int
    order: int
    spec_input: Any
    mask: Any
    site: str
    unmodelled: str = ""
    stage: int | None = None
    stage_axis: str = ""


def _events(raw: list[dict[str, Any]]) -> tuple[Any, ...]:
    from spec_lang.schedules import Event  # only on the counterexample path

    return tuple(Event(kind=e["kind"], mb=e["mb"], chunk=e["chunk"],
                       factor=None if e["factor"] is None else decode_attr(e["factor"]),
                       axis=e["axis"], op=e["op"], accumulate=e["accumulate"], note=e["note"],
                       site=e["site"]) for e in raw)


@dataclass(frozen=True)
class PipelineRecord:
    """``Plan(schedule=Pipeline(...))`` as data: what the counterexample report reads."""

    name: str
    microbatches: int
    chunks: int
    pp: int
    axis: str
    stages_raw: tuple[Any, ...]
    holders_of: Mapping[str, tuple[int, ...]]

    def where(self, j: int) -> tuple[int, int]:
        """(physical stage, chunk) of virtual stage ``j`` (as ``Pipeline.where``)."""
        return j % self.pp, j // self.pp

    def holders(self, name: str) -> list[int]:
        """Virtual stages holding parameter ``name`` (recorded for every goal's parameter)."""
        return list(self.holders_of.get(name, ()))

    @property
    def schedule(self) -> Any:
        from spec_lang.schedules import Schedule

        return Schedule(self.name, tuple(_events(list(s)) for s in self.stages_raw),
                        self.microbatches, self.chunks)


@dataclass(frozen=True)
class AccumulationRecord:
    """``Plan(schedule=Accumulation(...))`` as data."""

    microbatches: int
    events_raw: tuple[Any, ...]
    buckets_raw: tuple[tuple[str, tuple[Any, ...]], ...]

    def events_of(self, name: str) -> tuple[Any, ...]:
        """As ``Accumulation.events_of``: a bucket's events, else the stage's."""
        for k, ev in self.buckets_raw:
            if name == k or (k.endswith(".") and name.startswith(k)):
                return _events(list(ev))
        return _events(list(self.events_raw))

    @property
    def schedule(self) -> Any:
        from spec_lang.schedules import Schedule

        return Schedule("accumulation", (_events(list(self.events_raw)),), self.microbatches)


# -- Problem -> data (in the tracing process) ----------------------------------------------------
def _event_data(e: Any) -> dict[str, Any]:
    return {"kind": str(e.kind), "mb": e.mb, "chunk": int(e.chunk),
            "factor": None if e.factor is None else encode_attr(Fraction(e.factor)),
            "axis": None if e.axis is None else str(e.axis),
            "op": None if e.op is None else str(e.op), "accumulate": bool(e.accumulate),
            "note": str(e.note), "site": str(e.site)}


def _param_of(goal: str) -> str:
    return goal.split(":", 1)[1] if ":" in goal else goal


def _schedule_data(sch: Any, goals: Any) -> dict[str, Any] | None:
    if sch is None:
        return None
    if hasattr(sch, "holders") and hasattr(sch, "where"):          # Pipeline
        s = sch.schedule
        params = sorted({_param_of(g.name) for g in goals})
        return {"kind": "pipeline", "name": str(s.name), "microbatches": int(s.microbatches),
                "chunks": int(s.chunks), "pp": int(s.pp), "axis": str(sch.axis),
                "stages": [[_event_data(e) for e in st] for st in s.stages],
                "holders": {p: [int(j) for j in sch.holders(p)] for p in params}}
    if hasattr(sch, "events_of"):                                     # Accumulation
        return {"kind": "accumulation", "microbatches": int(sch.microbatches),
                "events": [_event_data(e) for e in sch.events],
                "buckets": [[str(k), [_event_data(e) for e in ev]] for k, ev in sch.buckets]}
    return None


def problem_to_data(problem: Any, frontend: str = "dsl",
                    seconds: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The JSON-able data form of ``problem`` (see the module docstring).

    Raises:
        KernelMalformed: a term attribute has no certificate encoding.
    """
    from spec_lang.tensor import site_of
    from spec_lang.term import walk

    roots = [t for g in problem.goals for t in (g.expected, g.actual)]
    roots += list(problem.spec_outputs.values())
    roots += [t for c in problem.cut_points for t in (c.spec, c.plan)]
    roots += [t for r in problem.rng for t in (r.spec_input, r.mask)]
    rows: list[list] = []
    ids: dict[int, int] = {}
    seen: dict[tuple, int] = {}      # row key -> id: equal rows (1 and Fraction(1)...) merge
    dims_json: dict[Any, list] = {}
    # the tracer's own frames: proofs/ and the torch front end's lowering (never a user file)
    here = os.path.dirname(os.path.abspath(__file__))
    own = (here + os.sep,
           os.path.join(os.path.dirname(here), "spec_lang", "torch_frontend") + os.sep)
    site_ix: dict[str, int] = {}     # distinct "file:line" -> index in sites.strings
    site_rows: list[list[int]] = []  # [node id, string index], the first site of a row wins
    sited: set[int] = set()
    for t in sorted(walk(roots), key=lambda n: n.uid):   # creation order: children first
        op = t.op.name
        if op not in OPS:
            raise KernelMalformed(f"op {op} has no certificate row (lowered before proving)")
        enc = [a if type(a) is str else encode_attr(a) for a in t.attrs]
        d = dims_json.get(t.dims)
        if d is None:
            d = dims_json[t.dims] = [[x.name, [str(a) for a in x.shards]] for x in t.dims]
        args = [ids[id(c)] for c in t.args]
        flat = all(type(a) is str or type(a) is int for a in enc)
        key = (op, tuple(args), tuple(enc) if flat else canonical_json(enc), id(d))
        i = seen.get(key)
        if i is None:
            i = seen[key] = len(rows)
            rows.append([op, args, enc, d])
        ids[id(t)] = i
        if i not in sited:
            where = site_of(t)
            # a node built with no user frame on the stack (the iteration's own terms) names
            # the tracer's entry point in this package: not a place in the user's files
            if not where.startswith("<") and not where.startswith(own):
                sited.add(i)
                site_rows.append([i, site_ix.setdefault(where, len(site_ix))])

    def dims(ds: Any) -> list:
        return [[d.name, [str(s) for s in d.shards]] for d in ds]

    return {
        "format": FORMAT, "version": VERSION, "frontend": frontend,
        "binding": {str(k): int(v) for k, v in problem.binding.items()},
        "mesh": [[str(k), int(v)] for k, v in problem.mesh.items()],
        "nodes": rows,
        "goals": [{"name": g.name, "kind": g.kind, "expected": ids[id(g.expected)],
                   "actual": ids[id(g.actual)], "placement": g.placement, "site": g.site,
                   "layer": g.layer} for g in problem.goals],
        "assumptions": [str(a) for a in problem.assumptions],
        "spec_outputs": [[str(k), ids[id(t)]] for k, t in problem.spec_outputs.items()],
        "cut_points": [{"name": c.name, "spec": ids[id(c.spec)], "plan": ids[id(c.plan)],
                        "kind": c.kind} for c in problem.cut_points],
        "rng": [{"side": r.side, "name": r.name, "p": encode_attr(Fraction(r.p)),
                 "dims": dims(r.dims),
                 "stream": None if r.stream is None else {
                     "seed": int(r.stream.seed), "fork": [str(a) for a in r.stream.fork],
                     "label": str(r.stream.label)},
                 "stream_index": int(r.stream_index), "order": int(r.order),
                 "spec_input": ids[id(r.spec_input)], "mask": ids[id(r.mask)],
                 "site": str(r.site), "unmodelled": str(r.unmodelled),
                 "stage": None if r.stage is None else int(r.stage),
                 "stage_axis": str(r.stage_axis)} for r in problem.rng],
        "schedule": _schedule_data(problem.schedule, problem.goals),
        "unsupported": [[str(n), str(why)] for n, why in getattr(problem, "unsupported", ())],
        "seconds": {k: f"{v:.3f}" for k, v in (seconds or {}).items()},
        "sites": {"strings": list(site_ix), "nodes": site_rows},
    }


# -- data -> Problem (in the prover's or the checker's process) ----------------------------------
@dataclass
class ProblemData:
    """A parsed, validated data document (node ids, not yet terms)."""

    frontend: str
    table: NodeTable
    binding: dict[str, int]
    mesh: dict[str, int]
    goals: list[dict[str, Any]]
    assumptions: tuple[str, ...]
    spec_outputs: list[tuple[str, int]]
    cut_points: list[dict[str, Any]]
    rng: list[dict[str, Any]]
    schedule: dict[str, Any] | None
    unsupported: tuple[tuple[str, str], ...]
    seconds: dict[str, str]
    sites: tuple[tuple[int, str], ...] = ()   # (node id, "file:line"): information only


def _bad(where: str, what: str) -> ProblemDataError:
    return ProblemDataError(f"traced data: {where}: {what}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _want(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise _bad(where, what)


def _obj(x: Any, keys: set[str], where: str) -> dict[str, Any]:
    _want(isinstance(x, dict) and set(x) == keys, where,
          f"not an object with keys {sorted(keys)}")
    return x


def _str(x: Any, where: str, none: bool = False) -> None:
    _want(isinstance(x, str) or (none and x is None), where, "not a string")


def _dims(x: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    _want(isinstance(x, list) and all(
        isinstance(d, list) and len(d) == 2 and isinstance(d[0], str) and isinstance(d[1], list)
        and all(isinstance(a, str) for a in d[1]) for d in x), where, "not [[dim, [shards]]]")
    return tuple((d[0], tuple(d[1])) for d in x)


def _events_ok(x: Any, where: str) -> None:
    _want(isinstance(x, list), where, "not a list of events")
    for k, e in enumerate(x):
        w = f"{where}[{k}]"
        _obj(e, EVENT_KEYS, w)
        _want(e["kind"] in ("F", "B", "scale", "reset", "collective"), w, "unknown event kind")
        _want(e["mb"] is None or (_is_int(e["mb"]) and e["mb"] >= 0), w, "bad mb")
        _want(_is_int(e["chunk"]) and e["chunk"] >= 0, w, "bad chunk")
        _want(e["factor"] is None or (isinstance(e["factor"], dict) and set(e["factor"]) == {"q"}),
              w, "factor is not null or {\"q\": ...}")
        if e["factor"] is not None:
            try:
                decode_attr(e["factor"])
            except KernelError as err:
                raise _bad(w, str(err)) from None
        for key in ("axis", "op"):
            _str(e[key], w + "." + key, none=True)
        _want(isinstance(e["accumulate"], bool), w, "accumulate is not a boolean")
        _str(e["note"], w + ".note")
        _str(e["site"], w + ".site")


def parse_problem_data(data: Any, check_types: bool = True) -> ProblemData:
    """Validate a data document (every key, type and node id) and read its node table with the
    kernel's strict reader; with ``check_types``, typecheck every node and its sizes at the
    binding (the checker's re-trace skips it: it only compares the nodes' hashes with its own
    typechecked table).

    Raises:
        ProblemDataError: anything not of the format, naming the place.
    """
    _want(isinstance(data, dict) and TOP_KEYS <= set(data) <= TOP_KEYS | OPTIONAL_KEYS,
          "top level", f"not an object with keys {sorted(TOP_KEYS)} (and optionally "
                       f"{sorted(OPTIONAL_KEYS)})")
    _want(data["format"] == FORMAT and data["version"] == VERSION, "format",
          f"not {FORMAT} version {VERSION}")
    _want(data["frontend"] in FRONTENDS, "frontend", f"{str(data['frontend'])[:20]!r} is not one "
          f"of {list(FRONTENDS)}")
    b = data["binding"]
    _want(isinstance(b, dict) and all(isinstance(k, str) and _is_int(v) and v > 0
                                      for k, v in b.items()), "binding",
          "not {name: positive integer}")
    m = data["mesh"]
    _want(isinstance(m, list) and all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
                                      and _is_int(x[1]) and x[1] > 0 for x in m), "mesh",
          "not [[axis, size], ...]")
    try:
        table = NodeTable.from_json(data["nodes"])
        if check_types:
            for i in range(len(table)):
                typecheck(table, i)
            check_sizes(table, dict(b))
    except KernelError as e:
        raise _bad("nodes", " ".join(str(e).split())[:200]) from None
    except (IndexError, KeyError, TypeError, ValueError) as e:
        raise _bad("nodes", f"a node's attributes do not fit its op ({type(e).__name__})") from None
    n = len(table)

    def node(x: Any, where: str) -> int:
        _want(_is_int(x) and 0 <= x < n, where, f"{str(x)[:20]} is not a node id")
        return x

    un = data["unsupported"]
    _want(isinstance(un, list) and all(isinstance(x, list) and len(x) == 2 and
                                       all(isinstance(y, str) for y in x) for x in un),
          "unsupported", "not [[name, reason], ...]")
    _want(isinstance(data["goals"], list) and (data["goals"] or un), "goals",
          "not a non-empty list")
    names = set()
    for k, g in enumerate(data["goals"]):
        w = f"goals[{k}]"
        _obj(g, GOAL_KEYS, w)
        for key in ("name", "kind", "placement", "site"):
            _str(g[key], f"{w}.{key}")
        _str(g["layer"], f"{w}.layer", none=True)
        node(g["expected"], w + ".expected")
        node(g["actual"], w + ".actual")
        _want(g["name"] not in names, w, f"goal {g['name'][:40]!r} twice")
        names.add(g["name"])
    _want(isinstance(data["assumptions"], list)
          and all(isinstance(a, str) for a in data["assumptions"]), "assumptions",
          "not a list of strings")
    so = data["spec_outputs"]
    _want(isinstance(so, list) and all(isinstance(x, list) and len(x) == 2
                                       and isinstance(x[0], str) for x in so), "spec_outputs",
          "not [[name, id], ...]")
    for k, (_, i) in enumerate(so):
        node(i, f"spec_outputs[{k}]")
    _want(isinstance(data["cut_points"], list), "cut_points", "not a list")
    for k, c in enumerate(data["cut_points"]):
        w = f"cut_points[{k}]"
        _obj(c, {"name", "spec", "plan", "kind"}, w)
        _str(c["name"], w + ".name")
        _want(c["kind"] in ("forward", "backward"), w, "kind is not forward or backward")
        node(c["spec"], w + ".spec")
        node(c["plan"], w + ".plan")
    _want(isinstance(data["rng"], list), "rng", "not a list")
    for k, r in enumerate(data["rng"]):
        w = f"rng[{k}]"
        _obj(r, RNG_KEYS, w)
        _want(r["side"] in ("spec", "plan"), w, "side is not spec or plan")
        for key in ("name", "site", "unmodelled", "stage_axis"):
            _str(r[key], f"{w}.{key}")
        try:
            p = decode_attr(r["p"])
        except KernelError as e:
            raise _bad(w + ".p", str(e)) from None
        _want(isinstance(p, Fraction), w + ".p", "not a rational")
        _dims(r["dims"], w + ".dims")
        s = r["stream"]
        if s is not None:
            _obj(s, {"seed", "fork", "label"}, w + ".stream")
            _want(_is_int(s["seed"]) and isinstance(s["fork"], list)
                  and all(isinstance(a, str) for a in s["fork"]) and isinstance(s["label"], str),
                  w + ".stream", "not {seed: int, fork: [axes], label: string}")
        _want(_is_int(r["stream_index"]) and _is_int(r["order"]), w, "bad stream index or order")
        _want(r["stage"] is None or _is_int(r["stage"]), w, "stage is not null or an integer")
        node(r["spec_input"], w + ".spec_input")
        node(r["mask"], w + ".mask")
    sch = data["schedule"]
    if sch is not None:
        _want(isinstance(sch, dict) and sch.get("kind") in ("pipeline", "accumulation"),
              "schedule", "not null or a pipeline / accumulation")
        if sch["kind"] == "pipeline":
            _obj(sch, {"kind", "name", "microbatches", "chunks", "pp", "axis", "stages",
                       "holders"}, "schedule")
            _want(all(_is_int(sch[k]) and sch[k] > 0 for k in ("microbatches", "chunks", "pp"))
                  and isinstance(sch["name"], str) and isinstance(sch["axis"], str),
                  "schedule", "bad name, sizes or axis")
            _want(isinstance(sch["stages"], list) and len(sch["stages"]) == sch["pp"],
                  "schedule.stages", "not one event list per stage")
            for k, st in enumerate(sch["stages"]):
                _events_ok(st, f"schedule.stages[{k}]")
            h = sch["holders"]
            _want(isinstance(h, dict) and all(
                isinstance(v, list) and all(_is_int(j) and 0 <= j < sch["pp"] * sch["chunks"]
                                            for j in v) for v in h.values()),
                "schedule.holders", "not {param: [virtual stage]}")
        else:
            _obj(sch, {"kind", "microbatches", "events", "buckets"}, "schedule")
            _want(_is_int(sch["microbatches"]) and sch["microbatches"] > 0, "schedule",
                  "bad microbatches")
            _events_ok(sch["events"], "schedule.events")
            _want(isinstance(sch["buckets"], list) and all(
                isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
                for x in sch["buckets"]), "schedule.buckets", "not [[name, [events]], ...]")
            for k, (_, ev) in enumerate(sch["buckets"]):
                _events_ok(ev, f"schedule.buckets[{k}]")
    sec = data["seconds"]
    _want(isinstance(sec, dict) and all(isinstance(v, str) and len(v) < 32 for v in sec.values()),
          "seconds", "not {phase: decimal string}")
    sites = _sites(data.get("sites", {"strings": [], "nodes": []}), n)
    return ProblemData(
        frontend=data["frontend"], table=table, binding=dict(b), mesh={k: v for k, v in m},
        goals=data["goals"], assumptions=tuple(data["assumptions"]),
        spec_outputs=[(k, i) for k, i in so], cut_points=data["cut_points"], rng=data["rng"],
        schedule=sch, unsupported=tuple((n, why) for n, why in un), seconds=dict(sec),
        sites=sites)


def _sites(x: Any, n: int) -> tuple[tuple[int, str], ...]:
    """``sites`` checked (types and bounds: node ids below ``n``, string indices in range, each
    node once) as ``(node id, "file:line")`` pairs."""
    _obj(x, {"strings", "nodes"}, "sites")
    strings = x["strings"]
    _want(isinstance(strings, list) and all(isinstance(s, str) and s for s in strings),
          "sites.strings", "not a list of non-empty strings")
    # information only: an over-long site is cut, never a malformed document (a file name the
    # plan compiled its code under is the plan's to choose: adversarial finding R8-6)
    strings = [s if len(s) <= MAX_SITE_CHARS else s[:MAX_SITE_CHARS - 3] + "..." for s in strings]
    rows = x["nodes"]
    _want(isinstance(rows, list), "sites.nodes", "not a list")
    m = len(strings)
    # one pass over the common case (``type(..) is int`` excludes booleans); the slow loop only
    # to name the first bad row
    if not (all(type(r) is list and len(r) == 2 and type(r[0]) is int and type(r[1]) is int
                and 0 <= r[0] < n and 0 <= r[1] < m for r in rows)
            and len({r[0] for r in rows}) == len(rows)):
        seen: set[int] = set()
        for k, r in enumerate(rows):
            _want(isinstance(r, list) and len(r) == 2 and _is_int(r[0]) and 0 <= r[0] < n
                  and _is_int(r[1]) and 0 <= r[1] < m and r[0] not in seen,
                  f"sites.nodes[{k}]", "not [node id, string index] (in range, each node once)")
            seen.add(r[0])
    out = [(i, strings[j]) for i, j in rows]
    return tuple(out)


def _term_attr(x: Any) -> Any:
    if isinstance(x, DimRef):
        from spec_lang.term import DimSpec

        return DimSpec(x.name, x.shards)
    if isinstance(x, tuple):
        return tuple(_term_attr(y) for y in x)
    return x


def to_problem(pd: ProblemData, path: str, source_sha256: str, *, sites: bool = False) -> Any:
    """The :class:`spec_lang.problem.Problem` of parsed data (terms rebuilt, hash-consed).

    ``path`` and ``source_sha256`` are the caller's (the process that read the file), never the
    tracer's. With ``sites`` (``prove``; never the checker, which drops them and does not import
    the tracer's ``spec_lang.tensor``), the document's sites are recorded for
    :func:`spec_lang.tensor.site_of` (messages only; they replace sites an earlier problem in
    this process left on shared terms).
    """
    from spec_lang.problem import CutPoint, Goal, Problem
    from spec_lang.term import Binding, DimSpec, Op, term

    terms: list[Any] = []
    specs: dict[Any, tuple[Any, ...]] = {}   # the table's dims tuples repeat: one DimSpec tuple each
    with paused_gc():
        for op, args, attrs, dims in pd.table.nodes:
            ds = specs.get(dims)
            if ds is None:
                ds = specs[dims] = tuple(DimSpec(n, s) for n, s in dims)
            terms.append(term(Op[op], tuple(terms[a] for a in args),
                              tuple(a if type(a) is str else _term_attr(a) for a in attrs), ds))
    if sites and pd.sites:
        from spec_lang.tensor import record_site

        for i, where in pd.sites:
            record_site(terms[i], where, first=False)
    sch = pd.schedule
    schedule: Any = None
    if sch is not None and sch["kind"] == "pipeline":
        schedule = PipelineRecord(sch["name"], sch["microbatches"], sch["chunks"], sch["pp"],
                                  sch["axis"], tuple(tuple(s) for s in sch["stages"]),
                                  {k: tuple(v) for k, v in sch["holders"].items()})
    elif sch is not None:
        schedule = AccumulationRecord(sch["microbatches"], tuple(sch["events"]),
                                      tuple((k, tuple(ev)) for k, ev in sch["buckets"]))
    return Problem(
        path=path, source_sha256=source_sha256, binding=Binding(pd.binding), mesh=dict(pd.mesh),
        goals=tuple(Goal(g["name"], g["kind"], terms[g["expected"]], terms[g["actual"]],
                         g["placement"], g["site"], g["layer"]) for g in pd.goals),
        assumptions=pd.assumptions,
        spec_outputs={k: terms[i] for k, i in pd.spec_outputs},
        rng=tuple(RngRecord(
            side=r["side"], name=r["name"], p=decode_attr(r["p"]),
            dims=tuple(DimSpec(n, tuple(s)) for n, s in r["dims"]),
            stream=None if r["stream"] is None else StreamRecord(
                r["stream"]["seed"], tuple(r["stream"]["fork"]), r["stream"]["label"]),
            stream_index=r["stream_index"], order=r["order"],
            spec_input=terms[r["spec_input"]], mask=terms[r["mask"]], site=r["site"],
            unmodelled=r["unmodelled"], stage=r["stage"], stage_axis=r["stage_axis"])
            for r in pd.rng),
        schedule=schedule,
        cut_points=tuple(CutPoint(c["name"], terms[c["spec"]], terms[c["plan"]], c["kind"])
                         for c in pd.cut_points),
        unsupported=pd.unsupported, frontend=pd.frontend)
