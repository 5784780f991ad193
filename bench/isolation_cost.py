"""What plan isolation costs (issue 10, family 6; ``docs/trusted-base.md``).

For each example plan: tracing it in this process (what ``prove`` did before isolation), tracing
it in a child (``proofs.isolation.trace_in_child``: the child's wall time, its own trace and
serialise seconds, the parent's parse and term rebuild), then ``prove --certificate`` in a
fresh process without and with its self-check, and ``check-certificate`` alone with and without
the re-trace. Every command runs in its own subprocess; seconds are wall-clock and CPU
(user + system of the command and the processes it waited for, ``os.wait4``: the figure to
compare when the cores are shared), peak RSS is the largest process of each command.

    python bench/isolation_cost.py [EXAMPLE.py ...] [--json PATH]

Default examples: ``llama_debug_megatron``, ``llama3_8b_megatron``, ``llama31_405b``.
Timings only: nothing here is asserted (tests assert behaviour, not speed).
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
DEFAULT = ["llama_debug_megatron", "llama3_8b_megatron", "llama31_405b"]


CPU: dict[tuple[str, ...], float] = {}   # CPU seconds of each command run


def _run(argv: list[str]) -> tuple[int, float, float, str]:
    """(exit code, seconds, peak RSS in MB, stdout) of a command in a fresh process; its CPU
    seconds go to ``CPU``."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = p.stdout.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    CPU[tuple(argv)] = ru.ru_utime + ru.ru_stime
    return p.returncode, time.monotonic() - t0, ru.ru_maxrss / 1024, out


def _py(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from proofs.cli import prove_main, check_main; "
            "sys.exit({'prove': prove_main, 'check': check_main}[sys.argv[1]](sys.argv[2:]))",
            *args]


def _trace_costs(plan: Path) -> dict[str, float]:
    code = (
        "import json, resource, sys, time\n"
        "from pathlib import Path\n"
        "def cpu(who):\n"
        "    r = resource.getrusage(who)\n"
        "    return r.ru_utime + r.ru_stime\n"
        "t0, c0 = time.monotonic(), cpu(resource.RUSAGE_SELF)\n"
        "import spec_lang\n"
        "p = spec_lang.load(sys.argv[1])\n"
        "t1, c1 = time.monotonic(), cpu(resource.RUSAGE_SELF)\n"
        "from proofs.isolation import trace_in_child\n"
        "from proofs.problem_data import to_problem\n"
        "k0 = cpu(resource.RUSAGE_CHILDREN)\n"
        "pd, child = trace_in_child(sys.argv[1], Path(sys.argv[1]).read_bytes())\n"
        "k1 = cpu(resource.RUSAGE_CHILDREN)\n"
        "t2, c2 = time.monotonic(), cpu(resource.RUSAGE_SELF)\n"
        "to_problem(pd, sys.argv[1], '')\n"
        "t3, c3 = time.monotonic(), cpu(resource.RUSAGE_SELF)\n"
        "print(json.dumps({'in_process_trace': t1 - t0, 'in_process_trace_cpu': c1 - c0,\n"
        "                  'child_cpu': k1 - k0, 'parse_cpu': c2 - c1, 'rebuild_cpu': c3 - c2,\n"
        "                  'child_wall': child.seconds['child'],\n"
        "                  'child_import': child.seconds.get('child_import', 0.0),\n"
        "                  'child_trace': child.seconds.get('child_trace', 0.0),\n"
        "                  'child_serialise': child.seconds.get('child_serialise', 0.0),\n"
        "                  'parse': child.seconds.get('parse', 0.0), 'rebuild': t3 - t2,\n"
        "                  'nodes': len(pd.table)}))\n")
    rc, _, rss, out = _run([sys.executable, "-c", code, str(plan)])
    if rc != 0:
        raise SystemExit(f"tracing {plan} failed (exit {rc})")
    return {**json.loads(out.splitlines()[-1]), "trace_rss_mb": rss}


def measure(name: str) -> dict[str, float]:
    plan = ROOT / "examples" / f"{name}.py"
    row: dict[str, float] = {"example": name, **_trace_costs(plan)}
    with tempfile.TemporaryDirectory() as d:
        cert = str(Path(d) / "c.json")
        cmd = _py("prove", str(plan), "--certificate", cert, "--no-check", "--json")
        rc, s, rss, out = _run(cmd)
        row.update(prove_no_check_s=s, prove_no_check_cpu=CPU[tuple(cmd)],
                   prove_no_check_rss_mb=rss, verdict_no_check=rc)
        cmd = _py("prove", str(plan), "--certificate", cert, "--json")
        rc, s, rss, out = _run(cmd)
        v = json.loads(out)
        row.update(prove_s=s, prove_cpu=CPU[tuple(cmd)], prove_rss_mb=rss, exit=rc,
                   verdict=v["verdict"], check_s=v["check"]["seconds"],
                   check_agrees=v["check"]["agrees"],
                   phases={k: round(x, 2) for k, x in v["seconds"].items()})
        cmd = _py("check", cert)
        rc, s, rss, _ = _run(cmd)
        row.update(check_alone_s=s, check_alone_cpu=CPU[tuple(cmd)], check_alone_rss_mb=rss,
                   check_exit=rc)
        cmd = _py("check", cert, "--no-retrace")
        rc, s, rss, _ = _run(cmd)
        row.update(check_no_retrace_s=s, check_no_retrace_cpu=CPU[tuple(cmd)],
                   check_no_retrace_exit=rc)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", nargs="*", default=DEFAULT)
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args(argv)
    rows = []
    for name in a.examples:
        r = measure(Path(name).stem)
        rows.append(r)
        print(f"{r['example']}: nodes {r['nodes']}; trace in process {r['in_process_trace']:.2f} s "
              f"(cpu {r['in_process_trace_cpu']:.2f}); child {r['child_wall']:.2f} s (cpu "
              f"{r['child_cpu']:.2f}; import {r['child_import']:.2f}, trace "
              f"{r['child_trace']:.2f}, serialise {r['child_serialise']:.2f}); parse "
              f"{r['parse']:.2f} s, rebuild {r['rebuild']:.2f} s (cpu "
              f"{r['parse_cpu'] + r['rebuild_cpu']:.2f}); prove --no-check "
              f"{r['prove_no_check_s']:.1f} s (cpu {r['prove_no_check_cpu']:.1f}); prove "
              f"{r['prove_s']:.1f} s (cpu {r['prove_cpu']:.1f}; check {r['check_s']:.1f} s, "
              f"agrees {r['check_agrees']}, {r['verdict']}); check-certificate "
              f"{r['check_alone_s']:.1f} s (cpu {r['check_alone_cpu']:.1f}), --no-retrace "
              f"{r['check_no_retrace_s']:.1f} s (cpu {r['check_no_retrace_cpu']:.1f}); peak RSS "
              f"prove {r['prove_rss_mb']:.0f} MB, check {r['check_alone_rss_mb']:.0f} MB",
              flush=True)
    if a.json:
        tmp = a.json + ".tmp"
        Path(tmp).write_text(json.dumps(rows, indent=1))
        os.replace(tmp, a.json)
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
