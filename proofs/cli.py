"""Command line: ``prove PLAN.py`` and ``check-certificate CERT.json`` (``docs/cli.md``).

Exit codes (STYLE rule 15): ``prove`` 0 EQUIVALENT, 1 NOT EQUIVALENT, 2 UNKNOWN, 3 bad input
(also ``--executor ray`` without ray installed, an unusable ``--certificate`` path, a certificate
that could not be written after proving: the verdict is printed first); an internal error is
reported as ``prove: internal error: ...`` and exits 2 (never 0).
``prove --precision-lint=error``: 4 when the verdict is EQUIVALENT but the lint has findings.
``prove`` re-checks its own certificate with ``check-certificate`` in a fresh process (unless
``--no-check``); the checker agrees when it verified prove's verdict (its exit 0, 1 or 2 and
the same verdict); otherwise both verdicts are printed and the exit code is the checker's
(4 rejected, 3 malformed; 2 when it gave no verdict).
``check-certificate`` exits with the verified verdict's code, so that only a proof passes a CI
gate (issue 12): 0 EQUIVALENT, 1 NOT EQUIVALENT, 2 UNKNOWN (0 with ``--accept-unknown``),
3 the file is unreadable or not a certificate, 4 rejected (one line saying why; also a
certificate whose plan file is missing, unless ``--no-retrace``, and a failed re-trace).
Every command takes ``--version``; results go to stdout, diagnostics (``prog: error``) to stderr.

Neither command imports or runs the plan file in its own process: ``prove`` traces it in a
child interpreter and ``check-certificate`` re-traces it in one (:mod:`proofs.isolation`).
This module imports the prover lazily: ``check-certificate`` must not load it (nor
``rewriting`` nor egglog).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from proofs.isolation import fewer_gc_passes

__all__ = ["prove_main", "check_main", "EXIT", "CHECK_EXIT"]

EXIT = {"EQUIVALENT": 0, "NOT EQUIVALENT": 1, "UNKNOWN": 2, "bad input": 3, "precision lint": 4}
# check-certificate: the verified verdict's code, so a CI gate passes only on a proof (issue 12)
CHECK_EXIT = {"EQUIVALENT": 0, "NOT EQUIVALENT": 1, "UNKNOWN": 2, "bad input": 3, "rejected": 4}


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are bad input: exit 3 with ``prog: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise _UsageError(message)


class _UsageError(Exception): pass  # noqa: E701 -- see _Parser.error


def _err(prog: str, msg: str, code: int = 3) -> int:
    print(f"{prog}: error: {_one_line(msg)}", file=sys.stderr)
    return code


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


class _Version(argparse.Action):
    """``--version``: print ``<command> <version>`` on stdout and exit 0 (the version is looked
    up only then: :mod:`proofs.version`)."""

    def __init__(self, option_strings: list[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the command's name and shardproof's version, and exit 0")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        from proofs.version import package_version

        print(f"{parser.prog} {package_version()}")
        raise SystemExit(0)


def _version_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action=_Version)


# -- prove --------------------------------------------------------------------------------------
def _exit_on_sigterm() -> None:
    """Console scripts: SIGTERM unwinds as Ctrl-C does, so every ``finally`` ends the child
    processes' groups (they were left running); exit 143 (128 + SIGTERM, as shells report)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def prove_main(argv: list[str] | None = None) -> int:
    if argv is None:   # the console script: this process is prove's alone
        fewer_gc_passes()
        _exit_on_sigterm()
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
    p.add_argument("--certificate", metavar="OUT.json", help="write a certificate here (.gz: gzip)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="worker processes for independent goals and z3 queries "
                        "(default: the usable cores); small problems stay in-process")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="wall-clock budget in seconds (default 600); goals left open are UNKNOWN")
    p.add_argument("--json", action="store_true", help="print a machine-readable verdict on stdout")
    p.add_argument("--verbose", action="store_true",
                   help="also print the prover's internal reason for each open goal")
    p.add_argument("--executor", default="local", choices=["local", "ray"],
                   help="where goals run: 'local' (a process pool of --jobs workers, "
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
    p.add_argument("--no-check", dest="check", action="store_false",
                   help="skip re-checking the certificate with check-certificate in a fresh "
                        "process (done by default; with no --certificate a temporary one is "
                        "checked)")
    p.add_argument("--trace-timeout", type=float, default=600.0, metavar="S",
                   help="time limit of the process that traces the plan file (default 600)")
    _version_flag(p)
    try:
        a = p.parse_args(argv)
    except _UsageError as e:
        return _err("prove", str(e))
    except SystemExit as e:  # --help, --version
        return int(e.code or 0)
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
    if not a.timeout > 0 or not a.trace_timeout > 0:
        return _err("prove", f"--timeout and --trace-timeout must be > 0, got {a.timeout} and "
                             f"{a.trace_timeout}")
    path = Path(a.plan)
    if path.is_dir():
        return _err("prove", f"{path}: is a directory; give the plan file (a .py file defining "
                             f"spec and plan)")
    if not path.is_file():
        return _err("prove", f"{path}: no such file")
    if a.certificate is not None:
        from proofs.certificate import unwritable

        why = unwritable(a.certificate, path)
        if why:
            return _err("prove", why)
    try:
        source = path.read_bytes()
    except OSError as e:
        return _err("prove", f"{path}: cannot read: {e.strerror or e}")
    if a.torch and not a.json:   # before minutes of tracing (docs/unknown.md#untraced-ranks)
        from proofs.mesh_note import untraced_note

        note = untraced_note(source, str(path))
        if note:
            print(note, file=sys.stderr, flush=True)
    # 1. trace the plan file in a separate clean interpreter: only data comes back
    t0 = time.monotonic()
    # what decides and prints the verdict is imported before the plan runs (here, and in the
    # self-check's re-trace started now; proofs/code_guard.py refuses if the plan changed them)
    import tempfile

    import rich.table  # noqa: F401
    import proofs.certificate, proofs.first_difference, proofs.problem_data  # noqa: E401,F401
    import proofs.progress, proofs.prover, proofs.report_text, proofs.unknown  # noqa: E401,F401
    from proofs.isolation import start_check

    with tempfile.TemporaryDirectory(prefix="shardproof-prove-") as tmp:
        # the certificate (a temporary one when only the check needs it); the check starts now
        # and reads it once written (proofs/isolation.py start_check)
        cert_path = a.certificate or (str(Path(tmp) / "certificate.json") if a.check else None)
        t_check = time.monotonic()   # the check's process runs alongside the proof
        try:
            early = start_check(cert_path, path.resolve(), name=str(path), timeout_s=a.timeout,
                                frontend="torch" if a.torch else "dsl",
                                trace_timeout_s=a.trace_timeout) if a.check else None
        except OSError as e:   # R31b-6: no verdict without the check; --no-check skips it
            return _err("prove", f"cannot start the self-check: {e.strerror or e}; free "
                                 f"resources, or pass --no-check")
        try:
            return _prove_traced(a, path, source, t0, cert_path, (early, t_check))
        finally:
            if early is not None:   # no check ran: no verdict, no process left
                early.abort()


def _prove_traced(a: Any, path: Path, source: bytes, t0: float, cert_path: str | None,
                  started: tuple[Any, float]) -> int:
    """``prove`` once its arguments are checked: trace, prove, certificate, check, report.
    ``started``: the self-check (a PendingCheck or None) and when it started (monotonic s)."""
    early, t_check = started
    from proofs.isolation import TraceFailed, trace_in_child
    from proofs.report_text import check_line, checker_says   # not in the checker's process

    try:
        # the self-check typechecks every node of the certificate; without it, the traced
        # nodes are typechecked here
        data, child = trace_in_child(path, source, frontend="torch" if a.torch else "dsl",
                                     timeout_s=a.trace_timeout, check_types=not a.check)
    except TraceFailed as e:
        if e.kind == "internal":
            print(f"prove: internal error (in the tracing process): {_one_line(str(e))}; this is "
                  f"a bug in shardproof, the verdict is UNKNOWN", file=sys.stderr)
            return 2
        return _err("prove", str(e))
    if child.stderr:           # what the plan printed, the DSL's warnings
        sys.stderr.write(child.stderr)
    try:
        import hashlib

        from proofs.problem_data import to_problem

        problem = to_problem(data, str(path), hashlib.sha256(source).hexdigest(), sites=True)
    except Exception as e:  # noqa: BLE001 -- ours, never a verdict
        return _internal(e)
    t_trace = child.seconds.get("child", 0.0)
    t_load = time.monotonic() - t0 - t_trace
    from proofs.progress import Progress

    with Progress(enabled=not a.json) as progress:
        progress("trace", 1, 1)
        progress.finished("trace", t_trace, "plan")
        progress.finished("load", t_load)
        try:
            from proofs.prover import prove

            report = prove(problem, jobs=a.jobs, timeout_s=a.timeout, progress=progress,
                           executor=a.executor, worker_memory_gb=a.worker_memory,
                           on_phase=progress.finished)
            report.seconds = {"trace": t_trace, "load": t_load, **report.seconds}
        except Exception as e:  # noqa: BLE001
            return _internal(e)
        # 2. the certificate and the check
        write_error = None   # reported after the verdict (which stands; exit 3)
        if cert_path:
            try:
                from proofs.certificate import certificate_of, write_certificate

                t_cert = time.monotonic()
                write_certificate(cert_path, certificate_of(report))
                report.seconds["certificate"] = time.monotonic() - t_cert
                progress.finished("certificate", report.seconds["certificate"])
            except OSError as e:
                write_error = f"{cert_path}: cannot write the certificate: {e.strerror or e}"
            except Exception as e:  # noqa: BLE001
                return _internal(e)
        check, ran_s = None, 0.0
        if early is not None and write_error is None:
            progress.begin("check")
            check = early.run()
            ran_s = time.monotonic() - t_check   # its whole life; check.seconds: the wait
            report.seconds["check"] = check.seconds
            progress.finished("check", check.seconds)
    findings: list[Any] = []
    if a.precision_lint:
        try:
            from proofs.precision import lint

            findings = lint(problem)
        except Exception as e:  # noqa: BLE001
            return _internal(e)
    agrees = check is None or _agrees(report.verdict, check)
    try:
        if a.json:
            out = report.to_json()
            out["certificate"] = a.certificate if write_error is None else None
            if check is not None:
                out["check"] = {"agrees": agrees, "exit": check.code, "answer": check.answer,
                                "error": check.error, "seconds": round(check.seconds, 3)}
                if not agrees:   # a script reading "verdict" alone is not misled (round 5 note)
                    out["prover_verdict"], out["verdict"] = report.verdict, "UNKNOWN"
            if a.precision_lint:
                out["precision_lint"] = [f.to_json() for f in findings]
            print(json.dumps(out, indent=2, sort_keys=True))
            _summary(report, sys.stderr)
        else:
            _human(report, a.certificate if write_error is None else None, a.verbose)
            if check is not None:  # after the timing table (examples' golden outputs end there)
                print(check_line(report.verdict, check, agrees, ran_s))
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
    if write_error is not None:
        return _err("prove", f"{write_error} (the verdict above stands, but no certificate was "
                             f"written)")
    if not agrees:
        # the checker's code when it rejected (4) or could not read the certificate (3); else
        # 2: no verdict both agree on (the checker timed out, died, or checked another verdict)
        code = check.code if check.code in (CHECK_EXIT["rejected"], CHECK_EXIT["bad input"]) \
            else EXIT["UNKNOWN"]
        print(f"prove: error: the independent checker disagrees: prove says {report.verdict}, "
              f"check-certificate {checker_says(check)}; exit {code} (the checker's)",
              file=sys.stderr)
        return code
    if findings and a.precision_lint == "error" and report.verdict == "EQUIVALENT":
        return EXIT["precision lint"]
    return EXIT[report.verdict]


def _agrees(verdict: str, check: Any) -> bool:
    """The checker verified prove's own verdict: its exit code is that verdict's (0, 1 or 2:
    a verified NOT EQUIVALENT or UNKNOWN agrees too) and its answer names it; a rejection (4),
    a malformed certificate (3) or no answer is a disagreement."""
    a = check.answer
    return (a is not None and a.get("valid") is True and a.get("verdict") == verdict
            and check.code == CHECK_EXIT[verdict])


def _internal(e: BaseException) -> int:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    print(f"prove: internal error: {type(e).__name__}: {_one_line(str(e))}{where}; this is a "
          f"bug in shardproof, the verdict is UNKNOWN", file=sys.stderr)
    return 2


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _out(text: str) -> None:
    """Print ``text``, line by line, with every control character escaped (``\\x1b``): names
    and sites come from the plan's process, which must not be able to write lines, erase them
    or colour them (adversarial finding R8-5)."""
    for line in text.split("\n"):
        print(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                           else f"\\u{ord(m.group()):04x}", line))


def _open_line(what: str, ex: Any, internal: str, verbose: bool) -> None:
    _out(f"  open: {what.replace(chr(10), ' ')}: {ex.text} [{ex.link}]".replace("\n", " "))
    _out(f"        next: {ex.next}".replace("\n", " "))
    if verbose:
        _out(f"        prover: {internal}".replace("\n", " "))


def _human(report: Any, certificate: str | None, verbose: bool = False) -> None:
    _out(f"{report.verdict}: {report.path}".replace("\n", " "))
    if report.counterexample is not None:
        _out(report.counterexample.render())
    from dataclasses import replace

    from proofs.first_difference import first_differences
    from proofs.report_text import assumption_lines
    from proofs.unknown import explain, explain_unsupported

    shown = report.open_goals if report.counterexample is None else []
    # where each goal's two sides stop matching in the user's files (proofs/first_difference.py)
    diffs = first_differences(shown[:20]) if shown else {}
    for g in shown[:20]:   # in the user's terms (docs/unknown.md); the prover's with --verbose
        d, ex = diffs.get(g.name), explain(g.reason)
        if d is not None and (d.spec_site or d.plan_site):
            what = (f"{g.name}: spec {d.spec_site or '(no line)'} / plan "
                    f"{d.plan_site or '(no line)'} stop matching ({d.words})")
            # the normal forms' first operations say less than the user's lines: --verbose
            ex = replace(ex, text=ex.text.split(" (first difference: ")[0])
        else:       # no structural difference found: the line that produces the goal
            what = g.name + (f" ({g.site})" if g.site and not g.site.startswith("<") else "")
        _open_line(what, ex, g.reason, verbose)
    for name, why in report.unsupported[:20]:
        _open_line(name, explain_unsupported(name, why), f"not lowered: {why}", verbose)
    if len(shown) > 20:
        print(f"  ... and {len(shown) - 20} more open goals")
    if report.assumptions:
        _out("\n".join(assumption_lines(report.assumptions)))   # proofs/report_text.py
    if certificate:
        _out(f"certificate: {certificate}".replace("\n", " "))
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
    lc = dict(report.lemma_counts)
    if lc:  # obligation cutting: the lemmas actually proved (proofs/cut.py)
        names = {"obligations": "lemmas", "rewrite": "rewriting", "smt": "z3"}
        lt = Table(show_header=True, box=None, pad_edge=False)
        for k in lc:
            lt.add_column(names.get(k, k.replace("_", " ")), justify="right")
        lt.add_row(*(str(v) for v in lc.values()))
        con.print(lt)
    con.print(s)
    ex = report.executor
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
    if argv is None:
        fewer_gc_passes()
        _exit_on_sigterm()
    code = _check(argv)
    if argv is None:
        sys.exit(code)
    return code


def _check(argv: list[str] | None) -> int:
    p = _Parser(prog="check-certificate",
                description="Re-check a shardproof certificate with the small trusted checker.")
    p.add_argument("certificate")
    p.add_argument("--retrace", dest="retrace", action="store_true", default=True,
                   help="re-trace the plan file in a separate process and compare its goals, "
                        "binding and dropout records with the certificate's (the default; "
                        "without the plan file the certificate is rejected as not tied to a "
                        "plan)")
    p.add_argument("--no-retrace", dest="retrace", action="store_false",
                   help="check the certificate alone, without the plan file (the OK line says "
                        "the goals are not tied to a plan)")
    p.add_argument("--plan", help="the plan file to re-trace (default: the certificate's plan)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="z3 time limit per regenerated query (default 60)")
    p.add_argument("--trace-timeout", type=float, default=600.0, metavar="S",
                   help="time limit of the re-trace process in seconds (default 600)")
    p.add_argument("--accept-unknown", action="store_true",
                   help="exit 0 also for a verified UNKNOWN certificate (open goals accepted); "
                        "by default only a verified EQUIVALENT exits 0")
    p.add_argument("--json", action="store_true",
                   help="print one JSON line on stdout (with the exit code as \"exit\")")
    p.add_argument("--coq", action="store_true",
                   help="also export the certificate to Coq and check it with coqc "
                        "(docs/coq.md); reports what Coq checked")
    p.add_argument("--coq-file", metavar="OUT.v",
                   help="with --coq: keep the exported Coq file here")
    p.add_argument("--await-certificate", metavar="FRONTEND:NAME",
                   help="prove's self-check: with --plan, start re-tracing the plan now (with "
                        "this front end, under the name the certificate records) and read the "
                        "certificate only once stdin says 'certificate written' (end of input: "
                        "exit 2 without a verdict)")
    _version_flag(p)
    try:
        a = p.parse_args(argv)
    except _UsageError as e:
        return _err("check-certificate", str(e))
    except SystemExit as e:  # --help, --version
        return int(e.code or 0)
    if a.coq_file and not a.coq:
        return _err("check-certificate", "--coq-file needs --coq")
    if a.coq:
        import shutil

        from proofs.coq_run import INSTALL_HINT
        if shutil.which("coqc") is None:
            return _err("check-certificate", INSTALL_HINT, 3)
    if not a.trace_timeout > 0 or not a.timeout > 0:
        return _err("check-certificate", "--timeout and --trace-timeout must be > 0")
    if a.plan and (not a.retrace or not Path(a.plan).is_file()):   # a typo is bad input
        return _err("check-certificate", f"--plan {a.plan}: not a file" if a.retrace
                    else "--plan and --no-retrace exclude each other")
    from proofs.checker import check_certificate
    from proofs.errors import CertificateError, MalformedCertificate
    from proofs.retrace import await_certificate

    early = None
    if a.await_certificate is not None:   # prove's self-check (proofs/isolation.py start_check)
        if not a.plan:
            return _err("check-certificate", "--await-certificate needs --plan")
        early = await_certificate(a.plan, a.await_certificate, a.trace_timeout, sys.stdin)
        if early is None:
            return _err("check-certificate", "no certificate: stdin ended before 'certificate "
                                             "written' (prove stopped); no verdict", 2)
    if a.retrace and early is None and not a.json and sys.stderr.isatty():   # a torch trace: 30 s
        print("check-certificate: re-tracing the plan in a fresh process first", file=sys.stderr)
    try:
        r = check_certificate(a.certificate, retrace=a.retrace, plan_path=a.plan,
                              smt_timeout_s=a.timeout, trace_timeout_s=a.trace_timeout,
                              early=early)
    except MalformedCertificate as e:
        return _err("check-certificate", str(e), CHECK_EXIT["bad input"])
    except CertificateError as e:
        return _rejected(a.json, str(e))
    except Exception as e:  # noqa: BLE001 -- a checker crash is a rejection, never acceptance
        return _rejected(a.json, f"internal error: {type(e).__name__}: {_one_line(str(e))}")
    finally:
        if early is not None:
            early.cancel()
    coq: dict[str, Any] | None = None
    if a.coq:
        coq = _coq(a.certificate, a.coq_file)
        if "error" in coq:   # no Coq verdict: never the success code (docs/coq.md)
            return _err("check-certificate", f"Coq: {_one_line(coq['error'])}", 2)
    code = CHECK_EXIT[r.verdict]
    accepted = code == CHECK_EXIT["UNKNOWN"] and a.accept_unknown
    if accepted:
        code = 0
    if a.json:
        out = {"valid": True, "verdict": r.verdict, "obligations": r.total,
               "proved": r.checked, "steps": r.steps, "smt_queries": r.smt,
               "retraced": r.retraced, "exit": code}
        if coq is not None:
            out["coq"] = coq
        print(json.dumps(out, sort_keys=True))
    else:
        note = "; open goals accepted (--accept-unknown): exit 0" if accepted else "; exit 2: "\
            "goals are open (--accept-unknown accepts them)" if code == CHECK_EXIT["UNKNOWN"] \
            else ""
        print(r.summary() + note)
        if coq is not None:
            print(coq["summary"])
    return code


def _rejected(as_json: bool, reason: str) -> int:
    """The certificate does not check: exit 4 with one line (and ``{"valid": false}``)."""
    code = CHECK_EXIT["rejected"]
    if as_json:
        print(json.dumps({"valid": False, "reason": _one_line(reason), "exit": code},
                         sort_keys=True))
    return _err("check-certificate", f"rejected: {reason}", code)


def _coq(path: str, coq_file: str | None) -> dict[str, Any]:
    """Coq-check a certificate the Python checker accepted (docs/coq.md): a JSON-able report,
    or ``{"error": ...}`` when coqc fails on the library or the exported file."""
    from proofs.checker_load import MalformedCertificate, certificate_text
    from proofs.coq_export import ExportError
    from proofs.coq_run import CoqFailed, coq_check

    try:
        cert = json.loads(certificate_text(path))   # plain or gzip
        rep = coq_check(cert, out_v=coq_file, label=path)
    except (CoqFailed, ExportError, OSError, MalformedCertificate) as e:
        return {"error": str(e)}
    return {"summary": rep.summary(), "obligations": rep.status, "why": rep.why,
            "claims": rep.claims, "checked": rep.checked, "steps_rejected": rep.failed_steps,
            "axioms": rep.axioms, "seconds": {k: round(v, 2) for k, v in rep.seconds.items()},
            "peak_rss_mb": round(rep.peak_rss_mb)}


if __name__ == "__main__":  # python -m proofs.cli prove|check ...
    cmd, *rest = sys.argv[1:] or ["prove"]
    fewer_gc_passes()
    sys.exit({"prove": prove_main, "check": check_main}.get(cmd, prove_main)(rest))
