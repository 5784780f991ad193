"""Proof cost at frontier scale and TrainVerify's Table 7 scaling grid (issue 5, ``docs/scaling.md``).

(a) **Frontier plans** (``examples/``): Llama-3-70B (TP8 SP x PP4 x DP16, 32 micro-batches),
Llama-3.1-405B (TP8 SP x PP16 x DP64 FSDP, 16 micro-batches), its long-context CP16 variant and
DeepSeek-V3-671B (PP16 x EP64 x ZeRO-1 DP). For each: trace (load) seconds, prove seconds, the
prover's per-phase seconds (``Report.seconds``), goal counts (``Report.counts``), the verdict,
certificate write and ``check-certificate`` seconds and the peak RSS, beside the targets
(<= 60 s, <= 8 GB on this 2-core machine) and TrainVerify's published time for the same model.
A file that does not exist yet is reported ``missing``.

(b) **Table 7 grid** around a 32-layer Llama at Llama-3-8B widths (``LLAMA3_8B``): one knob
varied at a time from the base dp 4 x tp 8 x 4 micro-batches (the plan of
``examples/llama3_8b_megatron.py``: ``build(dp, tp, microbatches, n_layers=...)``, Megatron TP x
DP x gradient accumulation; the ``pp`` knob uses ``spec_lang.plans.torchtitan.megatron_3d``,
TP x PP x DP with 1F1B). Knobs: global batch, hidden, sequence, query heads, pp, layers, dp,
micro-batches, tp. dp and micro-batches go 2 -> 1024 (powers of 2; the global batch is
dp x micro-batches x micro-batch size, so both divide it); tp goes 1 -> 8, the most the model
allows: Llama-3-8B has 8 KV heads and the plan shards the KV-head dim ``KVH`` (one KV head and
its 4 query heads per tp rank). Per knob the table gives max/min of our seconds and flags it
when > 2x (issue 5's target for dp, tp and micro-batches: flat, <= 2x from 2 to 1024).

Every configuration runs in a fresh subprocess (its peak RSS, ``resource.getrusage``, is its
own), under an address-space limit (``--mem-limit-gb``, default 8: a run that needs more is
reported ``oom`` instead of taking the shared machine down) and a wall-clock limit.

    python bench/verify_scaling.py [--part all|frontier|grid] [--only NAME ...] [--depth N ...]
        [--layers L] [--json PATH [--resume | --report]] [--markdown] [--quick] [--timeout S]
        [--jobs N] [--mem-limit-gb G] [--no-certify]

``--depth N ...`` builds each frontier plan at every depth given (``build(n_layers=N)``; the
certificate is then checked without re-tracing the file, the same work at every depth); with two
or more depths the report adds the **depth curve** (issue 14 item 5): per phase, seconds at each
depth and the ratio last / first, flagged above 1.5x:
``python bench/verify_scaling.py --part frontier --only llama31_405b --depth 4 16 32 64 126``.

``--only`` takes frontier names (``llama3_70b``, ``llama31_405b``, ``llama31_405b_cp16``,
``deepseek_v3``) and grid knobs (``dp``, ``tp``, ...). ``--json PATH`` keeps every result in
PATH (merged with what PATH already holds, written atomically after each configuration);
``--resume`` skips configurations PATH already holds; ``--report`` runs nothing and prints
the tables of PATH (``--markdown``: as Markdown, for ``docs/scaling.md``). ``--quick`` is the smoke-test grid: the
debug Llama (``spec_lang.models.DEBUG``) at 1 layer (2 for pp 2), two points per knob, run in
this process.

The tables and the figures they compare against are in the sibling ``bench/scaling_tables.py``.

Exit code 0 when every configuration that ran was EQUIVALENT (missing frontier files do not
count), 1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import hashlib
import importlib.util
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(Path(__file__).resolve().parent) not in sys.path:   # the sibling scaling_tables.py
    sys.path.append(str(Path(__file__).resolve().parent))

from scaling_tables import (  # noqa: E402,F401 -- after the path set-up; the figures are re-exported
    FLAT_KNOBS, FLAT_RATIO, TARGET_GB, TARGET_S, TRAINVERIFY_FLAT_S, TRAINVERIFY_FRONTIER_S,
    TRAINVERIFY_GRID_S, render,
)

EXAMPLE_8B = ROOT / "examples" / "llama3_8b_megatron.py"

# name -> (example file, what it is)
FRONTIER: dict[str, tuple[str, str]] = {
    "llama3_70b": ("examples/llama3_70b_megatron_3d.py",
                   "Llama-3-70B, TP8 SP x PP4 x DP16, 32 mb"),
    "llama31_405b": ("examples/llama31_405b.py",
                     "Llama-3.1-405B, TP8 SP x PP16 x DP64 FSDP, 16 mb"),
    "llama31_405b_cp16": ("examples/llama31_405b_cp16.py",
                          "Llama-3.1-405B long context, CP16"),
    "deepseek_v3": ("examples/deepseek_v3.py",
                    "DeepSeek-V3-671B, PP16 x EP64 x ZeRO-1 DP"),
}

# the grid's base point and knob values
BASE = {"dp": 4, "tp": 8, "microbatches": 4, "micro_batch_size": 1, "pp": 0}
POW2_1024 = [2 ** i for i in range(1, 11)]
KNOBS = ("batch", "hidden", "sequence", "heads", "pp", "layers", "dp", "microbatches", "tp")


def _grid_points(quick: bool, layers: int, mbs: int = 1) -> list[dict[str, Any]]:
    """One dict per configuration: knob, value, base model, config overrides, mesh."""
    if quick:   # debug Llama: 2 layers, hidden 16, 4 / 2 heads; tp <= KVH = 2
        vals = {"batch": [4, 8], "hidden": [16, 32], "sequence": [8, 16], "heads": [4, 8],
                "pp": [1, 2], "layers": [1, 2], "dp": [2, 4], "microbatches": [2, 4],
                "tp": [1, 2]}
        base = {"dp": 2, "tp": 2, "microbatches": 2, "micro_batch_size": 1, "pp": 0}
        model, n_layers = "debug", 1
    else:
        vals = {"batch": [16, 32, 64, 128], "hidden": [1024, 2048, 4096, 8192],
                "sequence": [2048, 4096, 8192, 16384, 32768], "heads": [8, 16, 32, 64],
                "pp": [1, 2, 4, 8, 16, 32], "layers": [4, 8, 16, 32], "dp": POW2_1024,
                "microbatches": POW2_1024, "tp": [1, 2, 4, 8]}
        base, model, n_layers = {**BASE, "micro_batch_size": mbs}, "llama3_8b", layers
        vals["batch"] = [b * mbs for b in vals["batch"]]
    out = []
    for knob in KNOBS:
        for v in vals[knob]:
            p = {**base, "knob": knob, "value": v, "model": model, "n_layers": n_layers,
                 "config": {}}
            if knob == "batch":     # global batch = dp x mb x micro-batch size
                p["micro_batch_size"] = v // (base["dp"] * base["microbatches"])
            elif knob == "hidden":
                p["config"] = {"hidden": v}
            elif knob == "sequence":
                p["config"] = {"seq": v}
            elif knob == "heads":
                p["config"] = {"n_heads": v}
            elif knob == "layers":
                p["n_layers"] = v
            else:                   # pp, dp, microbatches, tp
                p[knob] = v
            if knob == "pp" and p["n_layers"] % v:
                p["n_layers"] = v   # pp divides the layers (quick grid: 1 layer)
            out.append(p)
    return out


def _grid_key(p: dict[str, Any]) -> str:
    mbs = p["micro_batch_size"]
    return (f"grid:{p['model']}:{p['knob']}={p['value']}:L{p['n_layers']}:dp{p['dp']}:tp{p['tp']}"
            f":pp{p['pp'] or 1}:mb{p['microbatches']}"
            + (f":mbs{mbs}" if mbs != 1 and p["knob"] != "batch" else ""))


# -- one configuration (runs in the child) -------------------------------------------------------
def _import(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _grid_problem(p: dict[str, Any]) -> Any:
    """The Problem of one grid point: the 8B example's ``build`` with the model config's
    widths replaced (pp 0), or ``megatron_3d`` on the same config (pp >= 1)."""
    import spec_lang
    from spec_lang import AdamW
    from spec_lang.models import DEBUG, LLAMA3_8B, llama

    base = {"llama3_8b": LLAMA3_8B, "debug": DEBUG}[p["model"]]
    cfg = dataclasses.replace(base, **p["config"])
    dp, tp, mb, mbs, pp = p["dp"], p["tp"], p["microbatches"], p["micro_batch_size"], p["pp"]
    if pp:
        from spec_lang.plans.torchtitan import megatron_3d

        model = llama(dataclasses.replace(cfg, n_layers=p["n_layers"], batch=dp * mb * mbs))
        spec, plan = model.spec(AdamW()), megatron_3d(model, tp=tp, dp=dp, pp=pp,
                                                      microbatches=mb)
        return spec_lang.build_problem(spec, plan, path=f"{Path(__file__).name}:megatron_3d",
                                       sha256=_sha(Path(__file__)))
    mod = _import(EXAMPLE_8B, "_scaling_llama3_8b")
    mod.LLAMA3_8B = cfg     # build() reads the module's config: same plan, other widths
    spec, plan = mod.build(dp, tp, mb, n_layers=p["n_layers"], micro_batch_size=mbs)
    return spec_lang.build_problem(spec, plan, path=str(EXAMPLE_8B), sha256=_sha(EXAMPLE_8B))


def _frontier_problem(p: dict[str, Any], path: Path) -> Any:
    """The frontier plan's Problem, traced from ``path`` (a snapshot of the example file)."""
    import spec_lang

    if p["depth"] is None:
        return spec_lang.load(path)      # the module-level (spec, plan): full size
    mod = _import(path, "_scaling_frontier")
    spec, plan = mod.build(n_layers=p["depth"])
    return spec_lang.build_problem(spec, plan, path=str(path), sha256=_sha(path))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


def _failed_phase(tb: Any) -> str | None:
    """The prover phase (a function of proofs/phases/) a traceback went through last."""
    name = None
    where = os.path.join("proofs", "phases", "")
    for fr, _ in traceback.walk_tb(tb):
        if where in fr.f_code.co_filename and not fr.f_code.co_name.startswith("<"):
            name = fr.f_code.co_name
    return name


def run_one(p: dict[str, Any], timeout_s: float, jobs: int, certify: bool) -> dict[str, Any]:
    """Trace, prove and (optionally) certify one configuration in this process."""
    from proofs.prover import prove

    r: dict[str, Any] = {"status": "ok"}
    stage = "load"
    work = Path(tempfile.mkdtemp(prefix="shardproof-scaling-"))
    try:
        if p["kind"] == "frontier":
            # a snapshot: the shared tree's example may change while this runs, and the
            # certificate's re-trace compares the file's hash
            snap = work / Path(p["path"]).name
            shutil.copyfile(ROOT / p["path"], snap)
            r["plan_sha256"] = _sha(snap)
        t0 = time.monotonic()
        problem = _frontier_problem(p, snap) if p["kind"] == "frontier" else _grid_problem(p)
        r["load_s"] = time.monotonic() - t0
        r["mesh"] = dict(problem.mesh)
        stage = "prove"
        t1 = time.monotonic()
        report = prove(problem, jobs=jobs, timeout_s=timeout_s)
        r["prove_s"] = time.monotonic() - t1
        r["total_s"] = r["load_s"] + r["prove_s"]
        r["verdict"] = report.verdict
        r["counts"] = report.counts
        r["phases_s"] = dict(report.seconds)
        # obligation cutting (proofs/cut.py): the lemma obligations when the prover cut the
        # goals at layer boundaries; empty when it proved them uncut (slower)
        r["lemma_counts"] = dict(report.lemma_counts)
        r["peak_rss_prove_mb"] = _rss_mb()
        r["open_reasons"] = sorted({g.reason.split(";")[0] for g in report.open_goals})[:5]
        if report.counterexample is not None:
            r["counterexample_goal"] = report.counterexample.goal
        if certify:
            from proofs.certificate import certificate_of, write_certificate
            from proofs.checker import check_certificate

            stage = "certificate"
            cert = work / "cert.json"
            t2 = time.monotonic()
            write_certificate(cert, certificate_of(report))
            r["cert_write_s"] = time.monotonic() - t2
            r["cert_mb"] = cert.stat().st_size / 2 ** 20
            # what `--certificate OUT.json.gz` writes (write_certificate: gzip level 6)
            r["cert_gz_mb"] = len(gzip.compress(cert.read_bytes(), 6, mtime=0)) / 2 ** 20
            del report, problem
            # the module-level plan is what the certificate names: re-trace it like
            # `check-certificate` does; a reduced-depth build() is not in the file
            retrace = p["kind"] == "frontier" and p["depth"] is None
            stage = "check-certificate"
            t3 = time.monotonic()
            try:
                chk = check_certificate(cert, retrace=retrace)
                r["cert_ok"] = True
                r["cert_check"] = chk.summary()
            except Exception as e:  # noqa: BLE001 -- a rejection is a result, not a crash
                r["cert_ok"] = False
                r["cert_check"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            r["cert_check_s"] = time.monotonic() - t3
            r["cert_retrace"] = retrace
    except MemoryError as e:
        r.update(status="oom", error=f"MemoryError in {stage}"
                 + (f" ({_failed_phase(e.__traceback__)})" if stage == "prove" else ""))
    except Exception as e:  # noqa: BLE001 -- reported per configuration
        where = _failed_phase(e.__traceback__) if stage == "prove" else None
        r.update(status="error", error=f"{stage}{f' ({where})' if where else ''}: "
                 f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
    shutil.rmtree(work, ignore_errors=True)
    r["peak_rss_mb"] = _rss_mb()
    # prove(jobs > 1) workers: the largest child's peak (not added to this process's)
    r["peak_rss_workers_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return r


# -- the parent: subprocesses, JSON, tables -------------------------------------------------------
def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _commit() -> str:
    """HEAD's short hash, ``+N`` when N tracked files of the product (spec_lang/, proofs/,
    rewriting/) differ from it: the tree is shared and may hold others' uncommitted edits."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                "spec_lang", "proofs", "rewriting"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "?"
    n = sum(1 for line in dirty if line.strip())
    return f"{head}+{n}" if n else head


def _limit_memory(gb: float):
    def f() -> None:
        os.setsid()     # own process group: a timeout ends the run and its workers
        lim = int(gb * 2 ** 30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    return f


def run_subprocess(p: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", json.dumps(p),
           "--timeout", str(a.timeout), "--jobs", str(a.jobs)]
    if not a.certify:
        cmd.append("--no-certify")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=_limit_memory(a.mem_limit_gb))
    wall = a.timeout * (3 if p["kind"] == "frontier" else 1.5) + 120
    try:
        out, err = proc.communicate(timeout=wall)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)     # the child's own group (setsid above)
        proc.communicate()
        return {"status": "timeout", "error": f"no result after {wall:.0f} s (killed)"}
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (err.strip().splitlines() or ["(no output)"])[-1]
    status = "oom" if "MemoryError" in err or proc.returncode == -signal.SIGKILL else "error"
    how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
           else f"exit {proc.returncode}")
    return {"status": status, "error": f"{how}: {tail[:300]}"}


def _load_json(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {"runs": [], "results": {}}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"runs": [], "results": {}}
    data.setdefault("runs", [])
    data.setdefault("results", {})
    return data


def _save_json(path: Path | None, data: dict[str, Any]) -> None:
    if path is None:
        return
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _header(a: argparse.Namespace) -> dict[str, Any]:
    return {"started": _now(), "commit": _commit(), "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "mode": "quick" if a.quick else "full", "layers": a.layers, "depth": a.depth,
            "jobs": a.jobs, "mem_limit_gb": a.mem_limit_gb, "timeout_s": a.timeout,
            "in_process": a.in_process, "nice": os.nice(0)}


def _jobs_to_run(a: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    jobs: list[tuple[str, dict[str, Any]]] = []
    only = set(a.only or [])
    if a.part in ("all", "frontier") and not a.quick:
        for name, (path, desc) in FRONTIER.items():
            if only and name not in only:
                continue
            for d in a.depth or [None]:
                p = {"kind": "frontier", "name": name, "path": path, "desc": desc, "depth": d}
                jobs.append((f"frontier:{name}:depth{d or 'full'}", p))
    if a.part in ("all", "grid"):
        for p in _grid_points(a.quick, a.layers, a.micro_batch_size):
            if only and p["knob"] not in only:
                continue
            jobs.append((_grid_key(p), {"kind": "grid", **p}))
    return jobs


def run_all(a: argparse.Namespace, console: Any) -> dict[str, Any]:
    json_path = Path(a.json) if a.json else None
    data = _load_json(json_path)
    header = _header(a)
    data["runs"].append(header)
    todo = _jobs_to_run(a)
    for i, (key, p) in enumerate(todo, 1):
        if a.resume and key in data["results"] and \
                data["results"][key].get("status") not in ("error", "timeout", None):
            continue
        label = p.get("name") or f"{p['knob']}={p['value']}"
        tree = _commit()
        if p["kind"] == "frontier" and not (ROOT / p["path"]).is_file():
            r: dict[str, Any] = {"status": "missing", "error": f"{p['path']}: no such file"}
        else:
            load_before = [round(x, 2) for x in os.getloadavg()]
            console.print(f"[{i}/{len(todo)}] {label} ...", end=" ")
            t0 = time.monotonic()
            r = (run_one(p, a.timeout, a.jobs, a.certify and p["kind"] == "frontier")
                 if a.in_process
                 else run_subprocess(p, a))
            r["wall_s"] = time.monotonic() - t0
            r["loadavg_before"] = load_before
            console.print(f"{r.get('verdict', r['status'])} {r.get('total_s', r['wall_s']):.1f} s")
        r.update(key=key, job=p, measured_at=_now(), commit=tree)
        data["results"][key] = r
        _save_json(json_path, data)
    header["finished"] = _now()
    header["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    _save_json(json_path, data)
    data["_todo"] = [k for k, _ in todo]
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=["all", "frontier", "grid"], default="all")
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help=f"frontier plans ({', '.join(FRONTIER)}) and/or knobs "
                         f"({', '.join(KNOBS)})")
    ap.add_argument("--depth", type=int, nargs="+", default=None, metavar="N",
                    help="frontier plans at N layers (build(n_layers=N)); several: the depth "
                         "curve")
    ap.add_argument("--layers", type=int, default=32, metavar="L",
                    help="layers of the grid's non-layer knobs (default 32)")
    ap.add_argument("--micro-batch-size", type=int, default=1, metavar="K",
                    help="the grid's micro-batch size: global batch = dp x mb x K (default 1)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny grid (1-layer debug Llama, 2 points per knob), in-process")
    ap.add_argument("--json", metavar="PATH", help="keep results here (atomic writes)")
    ap.add_argument("--resume", action="store_true",
                    help="skip configurations the --json file already holds")
    ap.add_argument("--timeout", type=float, default=900.0, metavar="S",
                    help="prover budget per configuration (default 900)")
    ap.add_argument("--jobs", type=int, default=1, help="prove(jobs=N) (default 1)")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0, metavar="G",
                    help="address-space limit per configuration (default 8, the target)")
    ap.add_argument("--no-certify", dest="certify", action="store_false",
                    help="skip certificate write + check (frontier plans)")
    ap.add_argument("--in-process", action="store_true",
                    help="run configurations in this process (no per-config RSS)")
    ap.add_argument("--width", type=int, default=None, help="console width (default: wide)")
    ap.add_argument("--report", action="store_true",
                    help="run nothing: print the tables of what --json PATH holds")
    ap.add_argument("--markdown", action="store_true",
                    help="print Markdown tables (docs/scaling.md) instead of rich ones")
    ap.add_argument("--one", help=argparse.SUPPRESS)    # internal: one configuration -> JSON
    a = ap.parse_args(argv)
    if a.one is not None:
        p = json.loads(a.one)
        print(json.dumps(run_one(p, a.timeout, a.jobs, a.certify and p["kind"] == "frontier")))
        return 0
    if (a.resume or a.report) and not a.json:
        ap.error("--resume and --report need --json PATH")
    if a.only:
        unknown = set(a.only) - set(FRONTIER) - set(KNOBS)
        if unknown:
            ap.error(f"--only: unknown name(s) {sorted(unknown)}; choose from "
                     f"{list(FRONTIER) + list(KNOBS)}")
    if a.quick:
        a.in_process = True
        a.part = "grid" if a.part == "all" else a.part
    from rich.console import Console

    console = Console(width=a.width or max(Console().width, 200))
    if a.report:
        data = _load_json(Path(a.json))
        if not data["runs"]:
            ap.error(f"--report: {a.json} holds no results")
        keys = [k for k, _ in _jobs_to_run(a) if k in data["results"]]
    else:
        data = run_all(a, console)
        keys = data.pop("_todo")
    render(data, keys, console, a)
    rows = [data["results"][k] for k in keys]
    bad = [r for r in rows if r["status"] != "missing" and r.get("verdict") != "EQUIVALENT"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
