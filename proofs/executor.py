"""Normalise independent obligations on a pool of worker processes (``prove --jobs N``).

:func:`normalise_goals_parallel` is a drop-in for :func:`proofs.normal.normalise_goals`: it takes
the same items ``(name, expected, actual)`` and returns a :class:`~proofs.normal.NormaliseResult`
whose step ids are ids of the caller's :class:`~proofs.certificate.ProofSteps` and whose node ids
are ids of the caller's :class:`~proofs.kernel.NodeTable`. How:

1. **partition**: goals that share a non-trivial subterm (a node of height >=
   :data:`MIN_SHARED_HEIGHT`) go to the same task, since the normaliser memoises shared
   subterms and splitting them would normalise the shared part twice (union-find over the
   shared DAG, linear in its distinct nodes). Components are packed into at most
   ``4 * jobs`` tasks, largest first into the lightest task. When the work outside the heaviest
   of ``jobs`` bins is below :data:`POOL_MIN_NODES` nodes (a small problem, or one whose goals
   all share one forward/backward DAG, as an uncut model's gradients do) everything runs in this
   process: starting a pool costs ~1 s and buys nothing then.
2. **wire format**: a task's terms travel as a flat, topologically ordered list of
   ``(op, child positions, attrs, dims)`` rows (no recursion, so a 10^5-node DAG pickles fine);
   the worker rebuilds them with :func:`spec_lang.term.term`, which hash-conses (re-interns).
3. **worker**: :func:`proofs.normal.normalise_goals` with the worker's own ``NodeTable`` and
   ``ProofSteps``; it returns the table's rows, the step table, the chains as node / step ids
   and its normal forms in the flat form.
4. **merge** (this process): worker nodes are added to the run's table in order (hash-consing
   maps equal nodes of different workers to one id), every step is renumbered (``lhs``,
   ``rhs``, ``subst`` nodes, ``args`` / ``steps`` / ``of`` step ids) and added to the run's
   step table; each chain is checked to end at its normal form's node. Steps only refer to
   earlier steps, so the merged table replays in one pass like an in-process one: the
   checker accepts it the same way (verdicts identical; ids may differ).

Soundness: a task whose worker dies, raises, runs out of its memory limit or of the deadline
leaves its goals *open* with that reason; nothing a worker says is taken on trust except as
certificate steps the checker replays.

Executors: ``local`` (a ``spawn`` process pool of ``jobs`` workers, each with ``RLIMIT_AS`` set
to what it holds after start-up plus ``worker_memory_gb``) and ``ray`` (the optional extra
``pip install 'shardproof[ray]'``; one Ray task per task above, the same cap set by a worker
process's first task; connects to ``RAY_ADDRESS`` when set, else starts a local instance of
``jobs`` CPUs and shuts it down afterwards). Ray is only worth its start-up (~10 s) on a
cluster, for problems whose independent obligation groups take minutes.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from proofs.certificate import ProofSteps
from proofs.kernel import NodeTable
from proofs.normal import NormaliseResult, normalise_goals
from spec_lang.term import LEAF, Binding, Term, term, walk

__all__ = ["normalise_goals_parallel", "partition", "default_jobs", "default_worker_memory_gb",
           "ExecutorUnavailable", "require_executor", "EXECUTORS", "POOL_MIN_NODES",
           "MIN_SHARED_HEIGHT", "ExecutorStats", "limit_memory"]

EXECUTORS = ("local", "ray")
POOL_MIN_NODES = 4000      # nodes of work that must leave the heaviest bin to start a pool
MIN_SHARED_HEIGHT = 3      # a shared subterm at least this tall ties goals to one task
TASKS_PER_JOB = 4          # at most this many tasks per worker (load balance, progress)
SPLIT_COMPONENTS = False   # tests: deal one component's goals over tasks (exercises merging)
START_METHOD = "spawn"      # clean workers: RLIMIT_AS bounds all they hold; safe with threads
RAY_INSTALL = "pip install 'shardproof[ray]'"

Item = tuple[str, Term, Term]
Flat = list[tuple[Any, tuple[int, ...], tuple[Any, ...], tuple[Any, ...]]]


class ExecutorUnavailable(RuntimeError):
    """The chosen executor cannot run here (``--executor ray`` without ray installed)."""


@dataclass
class ExecutorStats:
    """What the executor did (shown in the summary, returned by ``prove`` as Report.executor)."""

    executor: str = "in-process"
    workers: int = 1
    tasks: int = 1
    components: int = 0
    nodes: int = 0
    worker_peak_rss_mb: float = 0.0
    worker_memory_gb: float | None = None
    failed_tasks: int = 0
    why: str = ""
    seconds: dict[str, Any] = field(default_factory=dict)  # partition, send, worker, merge

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def default_jobs() -> int:
    """The usable cores of this process (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_worker_memory_gb(jobs: int) -> float:
    """Address-space limit per worker: physical memory / jobs, at most 8 GB, at least 1 GB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        total = 8.0
    return float(max(1, min(8, int(total / max(1, jobs)))))


def require_executor(name: str) -> None:
    """Raise :class:`ExecutorUnavailable` (one line, how to install) when ``name`` cannot run."""
    if name not in EXECUTORS:
        raise ExecutorUnavailable(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    if name == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ExecutorUnavailable(
                f"--executor ray needs the optional ray extra, which is not installed: "
                f"{RAY_INSTALL}") from None


# -- partition ----------------------------------------------------------------------------------
def partition(items: Sequence[Item], jobs: int, *, tasks: int | None = None,
              min_shared_height: int = MIN_SHARED_HEIGHT) -> tuple[list[list[int]], dict]:
    """Group item indices into tasks; returns ``(tasks, info)``.

    Two items are in one component when their terms share a node of height >=
    ``min_shared_height`` (leaves have height 0). A component's cost is its goal count plus its
    non-leaf nodes of height >= ``min_shared_height`` (shorter subterms are cheap to redo).
    ``info``: ``components``, ``nodes`` (distinct nodes), ``cost`` (per task), ``parallel``
    (cost outside the heaviest of ``jobs`` bins: what a pool of ``jobs`` workers takes off
    the critical path).
    """
    roots = [t for _, e, a in items for t in (e, a)]
    order = walk(roots)
    pos = {id(t): i for i, t in enumerate(order)}
    height = [0] * len(order)
    parent = list(range(len(order)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    for i, t in enumerate(order):
        if t.args:
            height[i] = 1 + max(height[pos[id(c)]] for c in t.args)
            for c in t.args:
                j = pos[id(c)]
                if height[j] >= min_shared_height:
                    union(i, j)
    comp_items: dict[int, list[int]] = {}
    for k, (_, e, a) in enumerate(items):
        union(pos[id(e)], pos[id(a)])
    for k, (_, e, a) in enumerate(items):
        comp_items.setdefault(find(pos[id(e)]), []).append(k)
    # cost of a component: its non-leaf nodes (shared small subterms are counted where found)
    cost: Counter = Counter()
    for i, t in enumerate(order):
        if t.op not in LEAF and height[i] >= min_shared_height:
            cost[find(i)] += 1
    groups = [(cost[r] + len(ks), ks) for r, ks in comp_items.items()]
    if SPLIT_COMPONENTS:
        n = max(1, tasks or jobs)
        groups = [(c // n + 1, ks[j::n]) for c, ks in groups for j in range(n) if ks[j::n]]
    groups.sort(key=lambda g: (-g[0], g[1][0]))

    def pack(n: int) -> tuple[list[list[int]], list[int]]:
        bins: list[list[int]] = [[] for _ in range(n)]
        load = [0] * n
        for c, ks in groups:
            j = min(range(n), key=lambda b: (load[b], b))
            bins[j].extend(ks)
            load[j] += c
        keep = [j for j in range(n) if bins[j]]
        return [sorted(bins[j]) for j in keep], [load[j] for j in keep]

    _, loads = pack(max(1, jobs))
    out, out_loads = pack(max(1, tasks or TASKS_PER_JOB * jobs))
    info = {"components": len(comp_items), "nodes": len(order), "cost": out_loads,
            "parallel": sum(loads) - max(loads, default=0)}
    return out, info


# -- wire format ----------------------------------------------------------------------------------
def flatten(roots: Sequence[Term]) -> tuple[Flat, list[int]]:
    """``(rows, root positions)``: every node below ``roots`` once, children first."""
    order = walk(list(roots))
    pos = {id(t): i for i, t in enumerate(order)}
    rows: Flat = []
    for t in order:
        if any(isinstance(x, Term) for x in t.attrs):
            raise ValueError(f"{t.op.name} node has a term attribute (cannot be sent)")
        rows.append((t.op, tuple(pos[id(c)] for c in t.args), t.attrs, t.dims))
    return rows, [pos[id(r)] for r in roots]


def unflatten(rows: Flat) -> list[Term]:
    out: list[Term] = []
    for op, args, attrs, dims in rows:
        out.append(term(op, tuple(out[a] for a in args), attrs, dims))
    return out


# -- worker ---------------------------------------------------------------------------------------
def _vm_bytes() -> int:
    """This process's address space now (``VmSize``), 0 when unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def limit_memory(limit_bytes: int | None, preload: bool = True) -> None:
    """Worker initializer: cap the address space (``RLIMIT_AS``) at what the worker holds now
    plus ``limit_bytes`` (the interpreter and its imports are not counted; a forked worker's
    inherited mappings are not counted either). Allocation beyond it raises MemoryError."""
    if preload:  # import the normaliser before the cap and before the first task
        try:
            import rewriting.normalise  # noqa: F401
        except ImportError:
            pass
    if not limit_bytes:
        return
    limit_bytes += _vm_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit_bytes = min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, hard))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def normalise_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Worker: normalise one task's items with its own node table and step table.

    ``payload``: ``rows`` (flat terms), ``items`` (name, expected pos, actual pos), ``binding``
    (dict), ``seconds`` (time left). Returns ``nodes`` (the table's rows), ``steps``,
    ``chains`` (name -> nf_e pos, nf_a pos in ``nf_rows``, step_e, step_a), ``failed``,
    ``rule_counts``, ``nf_rows``, ``peak_rss_mb``.
    """
    from proofs.kernel import from_terms

    t0 = time.monotonic()
    terms = unflatten(payload["rows"])
    items = [(n, terms[e], terms[a]) for n, e, a in payload["items"]]
    binding = Binding(payload["binding"])
    table, steps = NodeTable(), ProofSteps()
    node_of: dict[int, int] = {}

    def node(t: Term) -> int:
        i = node_of.get(id(t))
        if i is None:
            terms.append(t)  # keep alive: ids stay valid
            from_terms(table, [t], node_of)
            i = node_of[id(t)]
        return i

    res = normalise_goals(items, binding, steps, node, progress=lambda *_: None,
                          deadline=time.monotonic() + payload["seconds"])
    names = list(res.chains)
    nf_rows, nf_pos = flatten([t for n in names for t in res.chains[n][:2]])
    chains = {n: (nf_pos[2 * k], nf_pos[2 * k + 1], res.chains[n][2], res.chains[n][3])
              for k, n in enumerate(names)}
    return {"nodes": table.nodes, "steps": steps.steps, "chains": chains, "failed": res.failed,
            "rule_counts": dict(res.rule_counts), "nf_rows": nf_rows,
            "peak_rss_mb": _peak_rss_mb(), "seconds": time.monotonic() - t0}


_CAPPED = [False]


def _ray_task(payload: dict[str, Any], limit_bytes: int | None) -> dict[str, Any]:
    if not _CAPPED[0]:  # once per Ray worker process: its first task sets the cap
        limit_memory(limit_bytes)
        _CAPPED[0] = True
    return normalise_task(payload)


# -- merge ----------------------------------------------------------------------------------------
def merge(out: dict[str, Any], table: NodeTable, steps: ProofSteps, node: Callable[[Term], int],
          res: NormaliseResult) -> None:
    """Add one worker result to the run's ``table`` / ``steps`` and record its chains in ``res``."""
    nmap: list[int] = []
    for op, args, attrs, dims in out["nodes"]:
        nmap.append(table.add(op, [nmap[a] for a in args], attrs, dims))
    smap: list[int] = []
    for st in out["steps"]:
        s = dict(st)
        s["lhs"], s["rhs"] = nmap[st["lhs"]], nmap[st["rhs"]]
        if "args" in st:
            s["args"] = [None if a is None else smap[a] for a in st["args"]]
        if "steps" in st:
            s["steps"] = [smap[x] for x in st["steps"]]
        if "of" in st:
            s["of"] = smap[st["of"]]
        if "subst" in st:
            s["subst"] = {k: _remap_subst(v, nmap) for k, v in st["subst"].items()}
        smap.append(steps._add(s))
    nfs = unflatten(out["nf_rows"])
    res.rule_counts.update(out["rule_counts"])
    res.failed.update(out["failed"])
    for name, (pe, pa, se, sa) in out["chains"].items():
        ne, na = nfs[pe], nfs[pa]
        se, sa = smap[se], smap[sa]
        if steps.rhs(se) != node(ne) or steps.rhs(sa) != node(na):
            res.failed[name] = "merge: a worker's chain does not end at its normal form (internal)"
            continue
        res.chains[name] = (ne, na, se, sa)


def _remap_subst(v: Any, nmap: list[int]) -> Any:
    if isinstance(v, dict) and set(v) == {"node"}:
        return {"node": nmap[v["node"]]}
    if isinstance(v, dict) and set(v) == {"nodes"}:
        return {"nodes": [nmap[x] for x in v["nodes"]]}
    return v


# -- the entry point ------------------------------------------------------------------------------
def normalise_goals_parallel(items: Sequence[Item], binding: Binding, steps: ProofSteps,
                             table: NodeTable, node: Callable[[Term], int], *, jobs: int,
                             executor: str = "local", worker_memory_gb: float | None = None,
                             progress: Callable[[str, int, int], None], deadline: float,
                             stats: ExecutorStats | None = None) -> NormaliseResult:
    """:func:`proofs.normal.normalise_goals` over ``jobs`` workers (see the module docstring).

    Args:
        items: ``(goal name, expected, actual)``.
        binding: real sizes (the normaliser's guards read them).
        steps, table, node: the run's step table, node table and ``term -> node id``.
        jobs: worker processes (``local``) or Ray CPUs (``ray``).
        executor: ``"local"`` or ``"ray"``.
        worker_memory_gb: address-space limit per worker (default
            :func:`default_worker_memory_gb`).
        deadline: ``time.monotonic()`` after which open tasks leave their goals open (timeout).
        stats: filled in with what ran where.

    Raises:
        ExecutorUnavailable: ``executor`` cannot run here (ray not installed).
    """
    stats = stats if stats is not None else ExecutorStats()
    require_executor(executor)
    mem = worker_memory_gb if worker_memory_gb is not None else default_worker_memory_gb(jobs)
    if not items:
        return NormaliseResult()
    t0 = time.monotonic()
    tasks, info = partition(items, jobs)
    stats.seconds["partition"] = time.monotonic() - t0
    stats.components, stats.nodes = info["components"], info["nodes"]
    in_process = (jobs <= 1 and executor == "local") or len(tasks) <= 1 \
        or info["parallel"] < POOL_MIN_NODES
    if in_process:
        stats.why = (f"in-process: {info['components']} component(s), "
                     f"{info['parallel']} nodes of parallel work (< {POOL_MIN_NODES})")
        return normalise_goals(items, binding, steps, node, progress=progress, deadline=deadline)
    stats.executor, stats.workers, stats.tasks = executor, jobs, len(tasks)
    stats.worker_memory_gb = mem
    limit = int(mem * 2**30)
    res = NormaliseResult()
    payloads = []
    for ks in tasks:
        rows, pos = flatten([t for k in ks for t in items[k][1:]])
        payloads.append({"rows": rows, "items": [(items[k][0], pos[2 * j], pos[2 * j + 1])
                                                 for j, k in enumerate(ks)],
                         "binding": dict(binding), "seconds": max(0.1, deadline - time.monotonic())})
    stats.seconds["send"] = time.monotonic() - t0 - stats.seconds["partition"]
    total, done = len(items), 0
    t_merge = 0.0
    progress("rewrite", 0, total)
    run = _run_ray if executor == "ray" else _run_local
    pending = set(range(len(tasks)))
    for k, out in run(payloads, jobs, limit, deadline):
        pending.discard(k)
        names = [items[i][0] for i in tasks[k]]
        if isinstance(out, BaseException):
            stats.failed_tasks += 1
            why = _failure(out, mem)
            for n in names:
                res.failed[n] = why
        else:
            stats.worker_peak_rss_mb = max(stats.worker_peak_rss_mb, out["peak_rss_mb"])
            stats.seconds.setdefault("worker", []).append(round(out["seconds"], 3))
            t1 = time.monotonic()
            try:
                merge(out, table, steps, node, res)
            except Exception as err:  # noqa: BLE001 -- an unmergeable result leaves goals open
                for n in names:
                    res.chains.pop(n, None)
                    res.failed[n] = f"merge failed: {type(err).__name__}: {err}"
            t_merge += time.monotonic() - t1
            for n in names:
                if n in res.failed and "MemoryError" in res.failed[n]:
                    res.failed[n] = f"worker memory limit ({mem:g} GB) reached: {res.failed[n]}"
        done += len(names)
        progress("rewrite", done, total)
    stats.seconds["merge"] = t_merge
    stats.seconds["total"] = time.monotonic() - t0
    for k in pending:  # not returned before the deadline
        for i in tasks[k]:
            res.failed[items[i][0]] = "timeout"
    return res


def _failure(err: BaseException, mem: float) -> str:
    name = type(err).__name__
    if isinstance(err, MemoryError) or "MemoryError" in name or "OutOfMemory" in name:
        return f"worker memory limit ({mem:g} GB) reached: {name}"
    if "BrokenProcessPool" in name or "WorkerCrashed" in name:
        return (f"worker died ({name}: possibly its memory limit of {mem:g} GB or a crash); "
                f"goal not proved")
    return f"worker failed: {name}: {' '.join(str(err).split())[:200]}"


def _run_local(payloads: list[dict], jobs: int, limit: int,
               deadline: float) -> Iterator[tuple[int, Any]]:
    """``(task index, result or exception)`` as tasks finish, on a ``spawn`` process pool."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ex = ProcessPoolExecutor(max_workers=min(jobs, len(payloads)),
                             mp_context=mp.get_context(START_METHOD),
                             initializer=limit_memory, initargs=(limit,))
    killed = False
    try:
        with _main_hidden():  # spawn starts every worker at the first submit
            futs = {ex.submit(normalise_task, p): k for k, p in enumerate(payloads)}
        left = set(futs)
        while left:
            wait_s = deadline - time.monotonic()
            if wait_s <= 0:
                break
            done, left = wait(left, timeout=wait_s, return_when=FIRST_COMPLETED)
            for f in done:
                try:
                    yield futs[f], f.result()
                except BaseException as err:  # noqa: BLE001 -- a worker's failure is a reason
                    yield futs[f], err
        if left:  # deadline: stop the workers we started
            killed = True
            for p in list((getattr(ex, "_processes", None) or {}).values()):
                p.kill()
    finally:
        ex.shutdown(wait=not killed, cancel_futures=True)


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """Start spawn workers without re-running the caller's script in them.

    ``spawn`` re-imports ``__main__`` in every worker from its path; a script that calls
    ``prove`` without an ``if __name__ == "__main__"`` guard would prove again there. The
    worker function lives in this module, so the workers need nothing from ``__main__``.
    """
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None
             and k in main.__dict__}
    try:
        if main is not None and getattr(main, "__spec__", None) is None:
            main.__dict__.pop("__file__", None)
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


def _run_ray(payloads: list[dict], jobs: int, limit: int,
             deadline: float) -> Iterator[tuple[int, Any]]:
    """``(task index, result or exception)`` from Ray tasks (one process per task)."""
    import ray

    started = False
    if not ray.is_initialized():
        addr = os.environ.get("RAY_ADDRESS")
        if addr:
            ray.init(address=addr, log_to_driver=False)
        else:
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        refs = {task.remote(p, limit): k for k, p in enumerate(payloads)}
        left = list(refs)
        while left:
            wait_s = deadline - time.monotonic()
            if wait_s <= 0:
                break
            done, left = ray.wait(left, num_returns=1, timeout=wait_s)
            for r in done:
                try:
                    yield refs[r], ray.get(r)
                except BaseException as err:  # noqa: BLE001
                    yield refs[r], err
        for r in left:
            ray.cancel(r, force=True)
    finally:
        if started:
            ray.shutdown()
