"""Sweeps: strategies x failure rates x seeds, resumable, run in a process pool or on Ray.

Runs go to a process pool (``executor="local"``: concurrent.futures, ``max_workers=2``, spawn,
``threads`` torch threads per worker, 1 by default) or to Ray (``executor="ray"``, the optional
extra ``pip install shardproof[ray]``; ray is imported only then). The parent process is the only
writer of ``OUT/runs.jsonl``: one JSON line per finished run, appended with one ``write`` of the
complete line, then ``flush`` and ``fsync``, so a kill loses at most the runs in flight.

Resume: on start the file is read back; every finished ``(strategy, failure_rate, seed)``
key is skipped, never run twice. A corrupt *last* line (a kill mid-write) is dropped with a
warning and truncated away; a corrupt line anywhere else raises `SimulationError` naming
``file:line``. Lines of a different sweep configuration (another model, cluster, target...)
are refused rather than mixed.

No orphans: an interrupted sweep (Ctrl-C, SIGTERM) cancels the queued runs and terminates its
pool workers before it exits; every worker also watches its parent and exits within a second
when the parent is gone (a SIGKILL cannot be caught), see `_init_worker`.

Progress: a rich progress bar when stderr is a terminal, else one plain line per finished run
(``sweep: 3/65 runs done ...``) so logs of a detached sweep show progress.

``no_failure`` never fails, so it runs once per seed under rate 0 and serves as the
reference at every rate. Summaries, tables, CSV and plots: `simulator.stats`,
`simulator.report`, `simulator.plots`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from simulator.cluster import Cluster
from simulator.errors import SimulationError
from simulator.run import NO_FAILURE, RunSpec, run_one
from simulator.stats import summarize

__all__ = ["EXECUTORS", "SweepSpec", "read_results", "append_result", "run_sweep", "summarize"]

EXECUTORS = ("local", "ray")
RESULTS_FILE = "runs.jsonl"


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A grid of runs sharing one configuration (``base``'s strategy, rate and seed are unused)."""

    strategies: tuple[str, ...]
    failure_rates: tuple[float, ...]
    seeds: tuple[int, ...]
    base: RunSpec

    def runs(self) -> list[RunSpec]:
        """The grid's runs, seed by seed (a partial sweep holds complete paired seeds first);
        ``no_failure`` only once per seed, at rate 0."""
        out, seen = [], set()
        for seed in self.seeds:
            for strategy in self.strategies:
                for rate in self.failure_rates:
                    r = 0.0 if strategy == NO_FAILURE else float(rate)
                    if (strategy, r, seed) in seen:
                        continue
                    seen.add((strategy, r, seed))
                    out.append(replace(self.base, strategy=strategy, failure_rate=r, seed=int(seed)))
        return out

    def config_sha256(self) -> str:
        """Hash of everything but the grid axes: runs of different configs must not mix.

        RunSpec fields added after sweeps were stored (`LATER_FIELDS`) count only away from their
        defaults, so adding an optional field does not orphan the sweeps already run.
        """
        spec = {k: v for k, v in asdict(self.base).items() if k not in ("strategy", "failure_rate", "seed")}
        for name, default in LATER_FIELDS.items():
            if spec.get(name) == default:
                del spec[name]
        spec["cluster"] = _cluster_identity(self.base.cluster)
        return hashlib.sha256(json.dumps(spec, sort_keys=True, default=repr).encode()).hexdigest()[:16]


# Fields of issue 16 (failure patterns; the shared host of `local-real`), added after issue 15's
# sweeps were stored: name -> default. RunSpec's, then Cluster's.
LATER_FIELDS: dict[str, Any] = {"mid_iteration": False, "failable_embedding": False}
LATER_CLUSTER_FIELDS: dict[str, Any] = {"update_s": 0.0, "host_cores": None, "host_load": 0.0}


def _cluster_identity(cluster: Cluster) -> dict[str, Any]:
    # The measured `local` preset differs run to run in its timings; its name and shape identify it.
    if cluster.name == "local":
        return {"name": "local", "n_stages": cluster.n_stages}
    # to_dict: JSON-able (region_links has tuple keys, which json cannot hash: issue 15)
    d = cluster.to_dict()
    d.pop("sources", None)
    for name, default in LATER_CLUSTER_FIELDS.items():
        if d.get(name) == default:
            del d[name]
    if d.get("model"):
        d["model"] = {k: v for k, v in d["model"].items() if k != "sources"}
    return d


# -- results file -------------------------------------------------------------------------------

def read_results(path: Path) -> list[dict[str, Any]]:
    """Finished runs in ``path`` (missing file: none). Drops a corrupt last line with a warning."""
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    body, tail = (lines[:-1], b"") if complete else (lines[:-1], lines[-1])
    out, good_end = [], 0
    for i, raw in enumerate(body):
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict) or "key" not in rec:
                raise ValueError("not a run record")
        except ValueError:
            if i == len(body) - 1 and not tail:
                warnings.warn(f"{path}:{i + 1}: dropping corrupt last line (an interrupted write)", stacklevel=2)
                _truncate(path, good_end)
                return out
            raise SimulationError(f"{path}:{i + 1}: corrupt results line (not a run record); "
                                  "fix or delete the line to resume") from None
        out.append(rec)
        good_end += len(raw) + 1
    if tail:
        warnings.warn(f"{path}:{len(body) + 1}: dropping incomplete last line (an interrupted write)", stacklevel=2)
        _truncate(path, good_end)
    return out


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one run as one complete line: a single write, then flush and fsync."""
    line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _key(rec: dict[str, Any]) -> tuple[str, float, int]:
    k = rec["key"]
    return (k["strategy"], float(k["failure_rate"]), int(k["seed"]))


# -- executors ---------------------------------------------------------------------------------

def _init_worker(threads: int = 1, parent_pid: int | None = None) -> None:
    """Pool worker setup: ``threads`` intra-op torch threads, and exit when the parent is gone.

    Two workers on two cores want one thread each: OpenMP with 2 threads on a busy 2-core machine
    makes small ops up to 100x slower (docs/trainer.md). The watchdog thread polls the parent's
    pid once a second and ends the worker when it changes (the parent was killed, even by
    SIGKILL, and the worker was re-parented), so a killed sweep leaves no orphans.
    """
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)
    if parent_pid is not None:   # before importing torch (10-20 s on a loaded machine)
        import threading

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def _local_results(specs: Sequence[RunSpec], max_workers: int, threads: int = 1) -> Iterable[dict[str, Any]]:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = mp.get_context("spawn")  # no fork of a process that may hold torch threads
    pool = ProcessPoolExecutor(max_workers=max_workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(threads, os.getpid()))
    finished = False
    try:
        pending = {pool.submit(run_one, s) for s in specs}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:  # interrupted (Ctrl-C, SIGTERM, an error): no worker may outlive the sweep
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in mp.active_children():
                proc.terminate()
            for proc in mp.active_children():
                proc.join(timeout=5)


def _ray_results(specs: Sequence[RunSpec], max_workers: int, threads: int = 1) -> Iterable[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise SimulationError("--executor ray needs ray: pip install 'shardproof[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False)
    remote = ray.remote(num_cpus=threads)(run_one)
    pending = [remote.remote(s) for s in specs]
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            yield ray.get(ref)


def run_sweep(sweep: SweepSpec, out: Path, *, executor: str = "local", max_workers: int = 2,
              progress: bool = True, console: Any = None, threads: int = 1) -> list[dict[str, Any]]:
    """Run every missing run of ``sweep``, appending to ``out/runs.jsonl``; return all records."""
    if executor not in EXECUTORS:
        raise SimulationError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
    if max_workers < 1:
        raise SimulationError(f"max_workers must be >= 1, got {max_workers}")
    if threads < 1:
        raise SimulationError(f"threads must be >= 1, got {threads}")
    out.mkdir(parents=True, exist_ok=True)
    lock = _lock(out)  # one writer per results directory; released when the process ends
    try:
        return _run_sweep_locked(sweep, out, executor, max_workers, progress, console, threads)
    finally:
        lock.close()


def _lock(out: Path):
    import fcntl

    f = open(out / ".lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise SimulationError(f"{out}: another sweep is writing here (lock {out / '.lock'})") from None
    return f


def _run_sweep_locked(sweep: SweepSpec, out: Path, executor: str, max_workers: int, progress: bool,
                      console: Any, threads: int) -> list[dict[str, Any]]:
    path = out / RESULTS_FILE
    sha = sweep.config_sha256()
    records = read_results(path)
    for i, rec in enumerate(records):
        if rec.get("config_sha256") != sha:
            raise SimulationError(f"{path}:{i + 1}: a run of another sweep configuration "
                                  f"({rec.get('config_sha256')} != {sha}); use another --out")
    done = {_key(r) for r in records}
    todo = [s for s in sweep.runs() if s.key() not in done]
    source = _ray_results if executor == "ray" else _local_results
    from rich.console import Console

    console = console or Console(stderr=True)
    total = len(sweep.runs())
    with _progress(console, progress, total, total - len(todo)) as advance:
        if todo:
            for rec in source(todo, max_workers, threads):
                rec["config_sha256"] = sha
                append_result(path, rec)
                records.append(rec)
                k = rec["key"]
                advance(f"{k['strategy']} rate={k['failure_rate']:g} seed={k['seed']} ({rec['wall_s']:.1f} s wall)")
    return records


@contextmanager
def _progress(console: Any, enabled: bool, total: int, resumed: int):
    """A rich bar on a terminal, plain lines otherwise; yields ``advance(description)``."""
    if not enabled:
        yield lambda description: None
        return
    if console.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), console=console) as bar:
            task = bar.add_task(f"{resumed} resumed", total=total, completed=resumed)
            yield lambda description: bar.update(task, advance=1, description=description)
        return
    t0, count = time.perf_counter(), [resumed]
    stream = getattr(console, "file", None) or sys.stderr
    print(f"sweep: {total} runs, {resumed} already done", file=stream, flush=True)

    def advance(description: str) -> None:
        count[0] += 1
        elapsed = time.perf_counter() - t0
        print(f"sweep: {count[0]}/{total} runs done, last {description}, elapsed {elapsed:.0f} s",
              file=stream, flush=True)

    yield advance


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: shardproof simulate sweep ...")
