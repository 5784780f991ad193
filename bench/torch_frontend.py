"""What ``prove --torch`` costs per example (issue 11, "Measure").

For each train file, in a fresh process: capture (every trace, each in its own child, two at a
time), lowering (both passes and the goals), and proving (``proofs.prover.prove``, one job),
in seconds; the process's peak RSS and the largest capture child's (MB); the verdict and goal
count; the graph nodes of the spec and of one plan rank; and, for the Llama files, graph nodes
per transformer layer (the plan graph at ``n_layers`` 2 minus the same file at 1 layer). Then
the count of ATen overloads with a lowering rule.

    python bench/torch_frontend.py [EXAMPLE.py ...] [--json PATH] [--no-per-layer]

Default: every file in ``examples/torch`` with a contract (``MESH``), the 8B-width one last.
Timings only: nothing here is asserted (tests assert behaviour, not speed). The machine's cores
may be shared: compare CPU seconds (also reported) when they are.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "torch"

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
path = sys.argv[1]
from spec_lang.torch_frontend.contract import read_train_file
from spec_lang.torch_frontend import frontend as F
t0 = time.monotonic()
tf = read_train_file(path)
sys.path.insert(0, str(Path(path).resolve().parent))
cap = F.capture_all(tf)
t1 = time.monotonic()
low = F.lower_all(cap)
problem = F.build_problem(cap, low)
t2 = time.monotonic()
from proofs.prover import prove
r = prove(problem, jobs=1)
t3 = time.monotonic()
me = resource.getrusage(resource.RUSAGE_SELF)
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "capture_s": t1 - t0, "lower_s": t2 - t1, "prove_s": t3 - t2,
    "cpu_s": me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime,
    "rss_mb": me.ru_maxrss / 1024, "capture_child_rss_mb": ch.ru_maxrss / 1024,
    "verdict": r.verdict, "goals": len(problem.goals), "unsupported": len(problem.unsupported),
    "spec_nodes": len(cap.spec.gm.graph.nodes), "plan_nodes": len(cap.plans[0].gm.graph.nodes),
    "traces": 3 + len(cap.plans),
}))
"""


def _measure(path: Path) -> dict:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["wall_s"] = time.monotonic() - t0
    return out


def _one_layer_copy(path: Path) -> Path | None:
    """The same train file at one layer (beside it, so its imports resolve), or None when the
    file does not name its layer count as ``n_layers=2`` / ``N_LAYERS = 2``."""
    src = path.read_text()
    for a, b in (("N_LAYERS = 2", "N_LAYERS = 1"), ("n_layers=2", "n_layers=1")):
        if a in src:
            fd, name = tempfile.mkstemp(prefix="_bench_1layer_", suffix=".py", dir=path.parent)
            with os.fdopen(fd, "w") as f:
                f.write(src.replace(a, b))
            return Path(name)
    return None


def _rules() -> int:
    code = ("from spec_lang.torch_frontend import frontend\n"
            "from spec_lang.torch_frontend.registry import RULES\nprint(len(RULES))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    return int(r.stdout.strip())


def _defaults() -> list[Path]:
    # pipelined files (docs/torch.md "Pipelining") are measured there, not by default
    files = sorted(p for p in EXAMPLES.glob("*.py") if "MESH" in p.read_text()
                   and "torch.distributed.pipelining" not in p.read_text()
                   and not p.name.startswith("_"))
    return sorted(files, key=lambda p: ("8b" in p.name, p.name))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", nargs="*", type=Path)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--no-per-layer", action="store_true", help="skip the one-layer captures")
    a = ap.parse_args(argv)
    files = a.examples or _defaults()
    rows = {}
    print(f"{'example':40} {'verdict':15} {'goals':>5} {'capture s':>9} {'lower s':>8} "
          f"{'prove s':>8} {'cpu s':>7} {'RSS MB':>7} {'child MB':>8} {'plan nodes':>10} "
          f"{'per layer':>9}")
    for p in files:
        m = _measure(p)
        if "error" not in m and not a.no_per_layer:
            one = _one_layer_copy(p)
            if one is not None:
                try:
                    m1 = _measure(one)
                finally:
                    one.unlink()
                if "error" not in m1:
                    m["plan_nodes_per_layer"] = m["plan_nodes"] - m1["plan_nodes"]
                    m["spec_nodes_per_layer"] = m["spec_nodes"] - m1["spec_nodes"]
        rows[p.name] = m
        if "error" in m:
            print(f"{p.name:40} error: {m['error']}")
            continue
        print(f"{p.name:40} {m['verdict']:15} {m['goals']:5d} {m['capture_s']:9.1f} "
              f"{m['lower_s']:8.1f} {m['prove_s']:8.1f} {m['cpu_s']:7.1f} {m['rss_mb']:7.0f} "
              f"{m['capture_child_rss_mb']:8.0f} {m['plan_nodes']:10d} "
              f"{m.get('plan_nodes_per_layer', '-'):>9}", flush=True)
    n = _rules()
    print(f"ATen overloads with a lowering rule: {n}")
    if a.json:
        tmp = a.json.with_suffix(".tmp")
        tmp.write_text(json.dumps({"examples": rows, "rules": n}, indent=1))
        os.replace(tmp, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
