"""Command line: ``prove PLAN.py`` and ``check-certificate CERT.json`` (``docs/cli.md``).

Exit codes (STYLE rule 15): ``prove`` 0 EQUIVALENT, 1 NOT EQUIVALENT, 2 UNKNOWN, 3 bad input
(also ``--executor ray`` without ray installed);
an internal error is reported as ``prove: internal error: ...`` and exits 2 (never 0).
``prove --precision-lint=error``: 4 when the verdict is EQUIVALENT but the lint has findings.
``check-certificate`` 0 the certificate checks, 1 it is rejected (one line saying why),
3 the file is unreadable or not a certificate. Results go to stdout, diagnostics to stderr as
``prog: error: ...``.

This module imports the prover lazily: ``check-certificate`` must not load it (nor
``rewriting`` nor egglog).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["prove_main", "check_main", "EXIT"]

EXIT = {"EQUIVALENT": 0, "NOT EQUIVALENT": 1, "UNKNOWN": 2, "bad input": 3, "precision lint": 4}


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are bad input: exit 3 with ``prog: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _err(prog: str, msg: str, code: int = 3) -> int:
    print(f"{prog}: error: {_one_line(msg)}", file=sys.stderr)
    return code


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


# -- prove --------------------------------------------------------------------------------------
def prove_main(argv: list[str] | None = None) -> int:
    code = _prove(argv)
    if argv is None:
        sys.exit(code)
    return code


def _prove(argv: list[str] | None) -> int:
    p = _Parser(prog="prove", description="Prove a training plan equivalent to its spec.")
    p.add_argument("plan", help="the plan file (a Python file defining the spec and the plan)")
    p.add_argument("--torch", action="store_true",
                   help="the file is a PyTorch train file: capture its single-device and "
                        "parallel training step (docs/torch.md)")
    p.add_argument("--certificate", metavar="OUT.json", help="write a certificate here")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="worker processes for independent obligations and z3 queries "
                        "(default: the usable cores); small problems stay in-process")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="wall-clock budget in seconds (default 600); goals left open are UNKNOWN")
    p.add_argument("--json", action="store_true", help="print a machine-readable verdict on stdout")
    p.add_argument("--executor", default="local", choices=["local", "ray"],
                   help="where obligations run: 'local' (a process pool of --jobs workers, "
                        "default) or 'ray' (optional extra: pip install 'shardproof[ray]'; "
                        "RAY_ADDRESS selects a cluster, else a local instance)")
    p.add_argument("--worker-memory", type=float, default=None, metavar="GB",
                   help="address-space limit per worker in GB (default: RAM / jobs, at most 8); "
                        "a worker over it leaves its goals open (UNKNOWN), never proved")
    p.add_argument("--precision-lint", nargs="?", const="warn", default=None,
                   choices=["warn", "error"], metavar="warn|error",
                   help="also lint reductions narrower than fp32 around collectives "
                        "(docs/parallelism/precision-lint.md); =error exits 4 on a finding "
                        "when the verdict is EQUIVALENT")
    try:
        a = p.parse_args(argv)
    except _UsageError as e:
        return _err("prove", str(e))
    from proofs.executor import ExecutorUnavailable, default_jobs, require_executor

    if a.jobs is None:
        a.jobs = default_jobs()
    if a.jobs < 1:
        return _err("prove", f"--jobs must be >= 1, got {a.jobs}")
    if a.worker_memory is not None and not a.worker_memory > 0:
        return _err("prove", f"--worker-memory must be > 0 (GB), got {a.worker_memory}")
    try:
        require_executor(a.executor)
    except ExecutorUnavailable as e:
        return _err("prove", str(e))
    if not a.timeout > 0:
        return _err("prove", f"--timeout must be > 0, got {a.timeout}")
    path = Path(a.plan)
    if not path.is_file():
        return _err("prove", f"{path}: no such file")
    if a.certificate and not Path(a.certificate).resolve().parent.is_dir():
        return _err("prove", f"{a.certificate}: the directory does not exist")
    t0 = time.monotonic()
    try:
        problem = _load(path, torch=a.torch)
    except _BadInput as e:
        return _err("prove", str(e))
    except Exception as e:  # noqa: BLE001 -- any other failure is ours, never a verdict
        return _internal(e)
    t_load = time.monotonic() - t0
    try:
        from proofs.prover import prove

        with _Progress(enabled=not a.json) as progress:
            progress.loaded(t_load)
            report = prove(problem, jobs=a.jobs, timeout_s=a.timeout, progress=progress,
                           executor=a.executor, worker_memory_gb=a.worker_memory)
        report.seconds = {"load": t_load, **report.seconds}
    except Exception as e:  # noqa: BLE001
        return _internal(e)
    if a.certificate:
        try:
            from proofs.certificate import certificate_of, write_certificate

            t_cert = time.monotonic()
            write_certificate(a.certificate, certificate_of(report))
            report.seconds["certificate"] = time.monotonic() - t_cert
        except OSError as e:
            return _err("prove", f"{a.certificate}: cannot write the certificate: {e.strerror}")
        except Exception as e:  # noqa: BLE001
            return _internal(e)
    findings: list[Any] = []
    if a.precision_lint:
        try:
            from proofs.precision import lint

            findings = lint(problem)
        except Exception as e:  # noqa: BLE001
            return _internal(e)
    try:
        if a.json:
            out = report.to_json()
            out["certificate"] = a.certificate
            if a.precision_lint:
                out["precision_lint"] = [f.to_json() for f in findings]
            print(json.dumps(out, indent=2, sort_keys=True))
            _summary(report, sys.stderr)
        else:
            _human(report, a.certificate)
            if a.precision_lint:
                print(f"precision lint: {len(findings)} finding(s)" if findings
                      else "precision lint: PASS (every reducing collective runs in fp32 or wider)")
                for f in findings:
                    print("  " + f.render())
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`prove ... | head`): the verdict's exit code still stands
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if findings and a.precision_lint == "error" and report.verdict == "EQUIVALENT":
        return EXIT["precision lint"]
    return EXIT[report.verdict]


class _BadInput(Exception):
    pass


def _load(path: Path, *, torch: bool = False) -> Any:
    """``spec_lang.load`` (``spec_lang.torch_frontend.load`` with ``torch``); user errors become
    :class:`_BadInput` with ``path:line: ...``."""
    import spec_lang
    from spec_lang.errors import SpecLangError

    if torch:
        try:
            from spec_lang import torch_frontend
        except ImportError as e:
            raise _BadInput(f"{path}: --torch needs torch: {e}") from None
        try:
            return torch_frontend.load(path)
        except SpecLangError as e:
            msg = str(e)
            raise _BadInput(msg if ":" in msg.split(" ", 1)[0] else f"{path}:1: {msg}") from None

    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise _BadInput(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        compile(source, str(path), "exec")
    except SyntaxError as e:
        raise _BadInput(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    try:
        return spec_lang.load(path)
    except SpecLangError as e:  # messages start with the user's file:line
        msg = str(e)
        raise _BadInput(msg if ":" in msg.split(" ", 1)[0] else f"{path}:1: {msg}") from None
    except Exception as e:  # noqa: BLE001 -- decide: the user's code or ours?
        site = _user_frame(e, path)
        if site is None:
            raise
        raise _BadInput(f"{site}: {type(e).__name__}: {e}") from None


def _user_frame(e: BaseException, path: Path) -> str | None:
    """``file:line`` when the exception was raised in the plan file itself."""
    tb = traceback.extract_tb(e.__traceback__)
    if tb and Path(tb[-1].filename).resolve() == path.resolve():
        return f"{path}:{tb[-1].lineno}"
    return None


def _internal(e: BaseException) -> int:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    print(f"prove: internal error: {type(e).__name__}: {_one_line(str(e))}{where}; this is a "
          f"bug in shardproof, the verdict is UNKNOWN", file=sys.stderr)
    return 2


class _Progress:
    """Progress over obligations on stderr, per phase (trace, refute, rewrite, smt, ...).

    A rich progress bar when stderr is a terminal; otherwise one plain line per finished phase
    (``prove: rewrite: 1165/1165 goals, 9.6 s``) and at most one line per 10 s within a long
    phase; nothing when ``enabled`` is false (``--json``).
    """

    PLAIN_EVERY_S = 10.0

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.bar = None
        self.tasks: dict[str, Any] = {}
        self.t0 = time.monotonic()
        self.started: dict[str, float] = {}
        self.last: dict[str, tuple[int, int]] = {}
        self.printed: dict[str, float] = {}
        self.pending_trace: float | None = None

    def __enter__(self) -> _Progress:
        if self.enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
                TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description:>8}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(),
                                console=Console(stderr=True), transient=True)
            self.bar.start()
        return self

    def loaded(self, seconds: float) -> None:
        """The plan was traced (``spec_lang.load``) in ``seconds``; shown with the first phase."""
        self.pending_trace = seconds

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.pending_trace is not None:
            t, self.pending_trace = self.pending_trace, None
            self._show("trace", 1, 1, t)
        if phase not in self.started:
            self.started[phase] = now
            for other, (d, n) in list(self.last.items()):  # a new phase ends the previous ones
                if d < n:
                    self._show(other, d, n, now - self.started[other], final=True)
        self.last[phase] = (done, total)
        self._show(phase, done, total, now - self.started[phase])

    def _show(self, phase: str, done: int, total: int, seconds: float,
              final: bool = False) -> None:
        if self.bar is not None:
            if phase not in self.tasks:
                self.tasks[phase] = self.bar.add_task(phase, total=max(total, 1))
            self.bar.update(self.tasks[phase], completed=done, total=max(total, 1))
            return
        now = time.monotonic()
        end = final or done >= total
        if total == 0:
            return  # nothing to do
        if self.printed.get(phase) == -1.0:  # reported finished: later rounds are silent
            return
        if not end and now - self.printed.get(phase, self.started.get(phase, now)) \
                < self.PLAIN_EVERY_S:
            return
        self.printed[phase] = -1.0 if end else now
        unit = "plan" if phase == "trace" else "goals"
        print(f"prove: {phase}: {done}/{total} {unit}, {seconds:.1f} s", file=sys.stderr,
              flush=True)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()


def _human(report: Any, certificate: str | None) -> None:
    print(f"{report.verdict}: {report.path}")
    if report.counterexample is not None:
        print(report.counterexample.render())
    shown = report.open_goals if report.counterexample is None else []
    for g in shown[:20]:
        print(f"  open: {g.name}: {g.reason}")
    for name, why in list(getattr(report.problem, "unsupported", ()) or ())[:20]:
        print(f"  open: {name}: not lowered: {why}")
    if len(shown) > 20:
        print(f"  ... and {len(shown) - 20} more open goals")
    if report.assumptions:
        print("assumptions: " + "; ".join(report.assumptions))
    if certificate:
        print(f"certificate: {certificate}")
    skipped = sum(g.reason.startswith("not attempted") for g in report.open_goals)
    if skipped:
        print(f"not attempted: {skipped} goal{'s' if skipped > 1 else ''}: the plan is already "
              f"refuted, so prove stops after the counterexample (no proof search)")
    _summary(report, sys.stdout)


def _summary(report: Any, stream: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    c = dict(report.counts)
    # goals left open because the plan is already refuted are not "open" in the sense of
    # "tried and not decided": they get their own column (only when there are any)
    c["not attempted"] = sum(g.reason.startswith("not attempted") for g in report.open_goals)
    c["open"] -= c["not attempted"]
    keys = ["total", "rewrite", "smt", "reused", "open", "refuted"]
    heads = ["goals", "rewriting", "z3", "reused", "open", "refuted"]
    if c["not attempted"]:
        keys.insert(5, "not attempted")
        heads.insert(5, "not attempted")
    # counts the prover adds later (e.g. lemma reuse of the cut phase) are shown when non-zero
    for k, v in c.items():
        if k not in keys and k != "not attempted" and v:
            keys.append(k)
            heads.append(k.replace("_", " "))
    t = Table(title=None, show_header=True, box=None, pad_edge=False)
    for col in heads:
        t.add_column(col, justify="right")
    t.add_row(*(str(c[k]) for k in keys))
    s = Table(show_header=True, box=None, pad_edge=False)
    for ph in report.seconds:
        s.add_column(ph + " s", justify="right")
    s.add_column("total s", justify="right")
    s.add_row(*(f"{v:.2f}" for v in report.seconds.values()), f"{sum(report.seconds.values()):.2f}")
    con = Console(file=stream, width=120, no_color=not stream.isatty())
    con.print(t)
    lc = dict(getattr(report, "lemma_counts", None) or {})
    if lc:  # obligation cutting: the lemmas actually proved (proofs/cut.py)
        names = {"obligations": "lemmas", "rewrite": "rewriting", "smt": "z3"}
        lt = Table(show_header=True, box=None, pad_edge=False)
        for k in lc:
            lt.add_column(names.get(k, k.replace("_", " ")), justify="right")
        lt.add_row(*(str(v) for v in lc.values()))
        con.print(lt)
    con.print(s)
    ex = getattr(report, "executor", None) or {}
    if ex.get("executor") not in (None, "in-process"):
        sec = ex.get("seconds", {})
        con.print(f"executor: {ex['executor']}, {ex['workers']} workers, {ex['tasks']} tasks "
                  f"({ex['components']} independent groups), worker peak RSS "
                  f"{ex['worker_peak_rss_mb']:.0f} MB (limit {ex['worker_memory_gb']:g} GB), "
                  f"merge {sec.get('merge', 0.0):.2f} s"
                  + (f", {ex['failed_tasks']} task(s) failed" if ex.get("failed_tasks") else ""),
                  highlight=False)


# -- check-certificate --------------------------------------------------------------------------
def check_main(argv: list[str] | None = None) -> int:
    code = _check(argv)
    if argv is None:
        sys.exit(code)
    return code


def _check(argv: list[str] | None) -> int:
    p = _Parser(prog="check-certificate",
                description="Re-check a shardproof certificate with the small trusted checker.")
    p.add_argument("certificate")
    p.add_argument("--retrace", dest="retrace", action="store_true", default=None,
                   help="require re-tracing the plan file and comparing its goals with the "
                        "certificate's (default: re-trace when the plan file is found)")
    p.add_argument("--no-retrace", dest="retrace", action="store_false",
                   help="check the certificate alone, without the plan file")
    p.add_argument("--plan", help="the plan file to re-trace (default: the certificate's)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="z3 time limit per regenerated query (default 60)")
    p.add_argument("--json", action="store_true")
    try:
        a = p.parse_args(argv)
    except _UsageError as e:
        return _err("check-certificate", str(e))
    from proofs.checker import check_certificate
    from proofs.errors import CertificateError, MalformedCertificate

    try:
        r = check_certificate(a.certificate, retrace=True if a.plan else a.retrace,
                              plan_path=a.plan, smt_timeout_s=a.timeout)
    except MalformedCertificate as e:
        return _err("check-certificate", str(e), 3)
    except CertificateError as e:
        if a.json:
            print(json.dumps({"valid": False, "reason": _one_line(str(e))}))
        return _err("check-certificate", f"rejected: {e}", 1)
    except Exception as e:  # noqa: BLE001 -- a checker crash is a rejection, never acceptance
        return _err("check-certificate",
                    f"rejected: internal error: {type(e).__name__}: {_one_line(str(e))}", 1)
    if a.json:
        print(json.dumps({"valid": True, "verdict": r.verdict, "obligations": r.total,
                          "proved": r.checked, "steps": r.steps, "smt_queries": r.smt,
                          "retraced": r.retraced}, sort_keys=True))
    else:
        print(r.summary())
    return 0


if __name__ == "__main__":  # python -m proofs.cli prove|check ...
    cmd, *rest = sys.argv[1:] or ["prove"]
    sys.exit({"prove": prove_main, "check": check_main}.get(cmd, prove_main)(rest))
