"""Plan isolation: user plan files run in a separate, clean interpreter; only data comes back.

A plan file is user code (issue 10, family 6). ``prove`` and the checker's re-trace never import
or execute it in their own process: a child interpreter (``python -I``: no ``PYTHON*``
variables, no user site-packages, no script directory on ``sys.path``; this installation's
``proofs`` and ``spec_lang`` first on it) reads the bytes its parent hashed from a private
file, traces them with the front end the parent names, and writes the Problem's data form
(:mod:`proofs.problem_data`) to a file the parent then parses strictly. Whatever the plan does
in the child (rebind names, monkeypatch ``proofs.prover`` or ``builtins``, print, exit) cannot
reach the parent's verdict: a child that fails, runs past its time bound, or leaves anything but
a well-formed document is a :class:`TraceFailed` with a one-line reason, never a verdict.

The same module runs ``check-certificate`` on ``prove``'s own certificate in a fresh interpreter:
started as ``prove`` starts, re-tracing meanwhile and reading the certificate once told it is
written (:func:`start_check`, ``prove``'s self-check), or on a certificate that exists already
(:func:`check_in_child`).

Front ends (:data:`FRONTENDS`, dispatched in the child by the name the parent passes, a key of
a fixed table): ``"dsl"`` is :func:`spec_lang.load`; ``"torch"`` (``prove --torch``) is
``spec_lang.torch_frontend.load(path, source) -> Problem`` (``docs/torch.md``), imported only in
the child: torch never loads in the process that decides a verdict. It captures its traces in
grandchildren of its own, in the child's process group (ended with it).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TRACE_TIMEOUT_S", "MAX_DATA_BYTES", "TraceFailed", "PendingTrace", "start_trace",
           "trace_in_child", "CheckOutcome", "check_in_child", "PendingCheck",
           "start_check", "child_main", "fewer_gc_passes"]

TRACE_TIMEOUT_S = 600.0
MAX_DATA_BYTES = 1 << 30         # a traced problem above 1 GiB is refused (405B: 6.5 MB)
MAX_STDERR_BYTES = 1 << 20       # of what the plan prints, the last MiB is relayed
_ROOT = str(Path(__file__).resolve().parents[1])   # the directory holding this `proofs`
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from proofs.isolation import child_main; sys.exit(child_main(sys.argv[2:]))")


class TraceFailed(Exception):
    """Tracing in the child gave no problem. ``kind``: ``"plan"`` (the plan file's own error:
    a ``file:line:`` message), ``"internal"`` (a bug of the front end) or ``"child"`` (the
    process failed, timed out or wrote something that is not the format)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _one_line(s: str, n: int = 300) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[: n - 3] + "..."


def _last_line(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip()]
    return _one_line(lines[-1], 200) if lines else ""


def _command(*args: str) -> list[str]:
    return [sys.executable, "-I", "-c", _BOOT, _ROOT, *args]


def fewer_gc_passes() -> None:
    """Collect cyclic garbage less often in this process (``prove``, ``check-certificate`` and
    the DSL's tracing child, never the torch front end's): each holds one large, long-lived,
    mostly acyclic structure (the 405B's 10^5-10^6 terms, nodes and rows), which CPython's
    default thresholds (700, 10, 10) rescan in every generation-2 pass: 1.5-3 s of the 405B's
    trace, proving and check each. Young cycles are still collected (every 10^5 allocations);
    nothing but the timing of reclaiming cycles changes."""
    import gc

    gc.set_threshold(100_000, 50, 100)


def _kill(proc: subprocess.Popen) -> None:
    """End the child and anything it left in its process group (the session created for it,
    whose id is the child's pid: the kernel does not reuse it while members remain)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# -- tracing in the child ------------------------------------------------------------------------
@dataclass
class PendingTrace:
    """A tracing child that runs while the parent does other work (the checker replays steps)."""

    path: str
    frontend: str
    timeout_s: float
    proc: subprocess.Popen
    tmp: tempfile.TemporaryDirectory
    started: float
    seconds: dict[str, float] = field(default_factory=dict)
    stderr: str = ""
    check_types: bool = True   # typecheck the returned nodes (the checker hashes them instead)
    code: Any = None   # proofs.code_guard.snapshot() taken before the child started

    def result(self) -> Any:
        """Wait for the child (within its time bound) and parse its document.

        Returns:
            :class:`proofs.problem_data.ProblemData`.

        Raises:
            TraceFailed: see the class.
        """
        from proofs.code_guard import CodeChanged, compare
        from proofs.kernel import paused_gc
        from proofs.problem_data import ProblemDataError, parse_problem_data

        d = Path(self.tmp.name)
        try:
            left = self.timeout_s - (time.monotonic() - self.started)
            try:
                rc = self.proc.wait(timeout=max(left, 0.01))
            except subprocess.TimeoutExpired:
                _kill(self.proc)
                raise TraceFailed("child", f"tracing {self.path} did not finish within "
                                           f"{self.timeout_s:g} s (--trace-timeout)") from None
            self.seconds["child"] = time.monotonic() - self.started
            _kill(self.proc)    # its process group too, before the code it may have touched
            self.stderr = _tail(d / "stderr")
            try:
                if self.code is not None:
                    compare(self.code)
            except CodeChanged as e:
                raise TraceFailed("plan", str(e)) from None
            out = d / "out.json"
            if not os.path.lexists(out):
                raise TraceFailed("child", f"the tracing process for {self.path} exited with "
                                           f"code {rc} without a result"
                                  + (f" ({_last_line(self.stderr)})" if self.stderr else ""))
            raw, size = _read_regular(out, MAX_DATA_BYTES + 1, tail=False)
            if max(size, len(raw)) > MAX_DATA_BYTES:
                raise TraceFailed("child", f"the tracing process wrote {size} bytes (more than "
                                           f"{MAX_DATA_BYTES})")
            t0 = time.monotonic()
            try:
                with paused_gc():
                    doc = json.loads(raw, parse_float=_no_float, parse_constant=_no_float)
            except (ValueError, RecursionError) as e:
                raise TraceFailed("child", f"the tracing process wrote something that is not "
                                           f"JSON: {_one_line(e, 120)}") from None
            if not isinstance(doc, dict) or len(doc) != 1 or not set(doc) <= {"problem",
                                                                                "error"}:
                raise TraceFailed("child", "the tracing process wrote something that is not "
                                           "{\"problem\": ...} or {\"error\": ...}")
            if "error" in doc:
                e = doc["error"]
                if not (isinstance(e, dict) and set(e) == {"kind", "message"}
                        and e["kind"] in ("plan", "internal") and isinstance(e["message"], str)):
                    raise TraceFailed("child", "the tracing process wrote a malformed error")
                raise TraceFailed(e["kind"], _one_line(e["message"], 2000))
            if rc != 0:
                raise TraceFailed("child", f"the tracing process exited with code {rc} after "
                                           f"writing its result")
            try:
                with paused_gc():
                    pd = parse_problem_data(doc["problem"], check_types=self.check_types)
            except ProblemDataError as e:
                raise TraceFailed("child", str(e)) from None
            if pd.frontend != self.frontend:
                raise TraceFailed("child", f"the tracing process answered for front end "
                                           f"{pd.frontend!r}, not {self.frontend!r}")
            self.seconds["parse"] = time.monotonic() - t0
            for k, v in pd.seconds.items():
                try:
                    self.seconds["child_" + k] = float(v)
                except ValueError:
                    pass
            return pd
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Kill the child and whatever it left running in its process group; remove the
        private directory."""
        _kill(self.proc)
        self.tmp.cleanup()


def _read_regular(path: Path, limit: int, *, tail: bool) -> tuple[bytes, int]:
    """``(bytes, size)`` of a *regular* file in the trace directory, at most ``limit`` bytes (its
    last ones with ``tail``). The plan's child can write there (proofs/sandbox.py allows it),
    so a symlink (to ``/dev/zero``), a FIFO, a directory or a vanished file is a TraceFailed,
    never a crash, a hang or an unbounded read (adversarial finding R3-1)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise TraceFailed("child", f"the tracing process left {path.name} unreadable "
                                   f"({e.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise TraceFailed("child", f"the tracing process replaced {path.name} by something "
                                   "that is not a regular file")
    with os.fdopen(fd, "rb") as f:
        size = st.st_size
        if tail:
            f.seek(max(0, size - limit))
        return f.read(limit), size


def _tail(path: Path, limit: int = MAX_STDERR_BYTES) -> str:
    """The child's stderr (what the plan printed), its last ``limit`` bytes when longer."""
    data, size = _read_regular(path, limit, tail=True)
    text = data.decode(errors="replace")
    return text if size <= limit else f"[... {size - limit} bytes of output cut ...]\n{text}"


def _no_float(s: str) -> Any:
    raise ValueError(f"non-integer number {s[:20]}")


def start_trace(path: str | Path, source: bytes, *, frontend: str = "dsl",
                timeout_s: float = TRACE_TIMEOUT_S, lint: bool = True) -> PendingTrace:
    """Start tracing ``source`` (the bytes of the plan file ``path``) in a child; ``lint=False``
    (the checker's re-trace: the child's verb is ``retrace``) leaves the DSL's partial-sum lint
    out (``spec_lang.partial.LINT``: warnings only, the terms are the same).

    Raises:
        TraceFailed: ``frontend`` is not a known front end, or the child cannot start.
    """
    if frontend not in FRONTENDS:
        raise TraceFailed("plan", f"unknown front end {frontend!r} (known: {sorted(FRONTENDS)})")
    from proofs import code_guard, kernel, problem_data  # noqa: F401 -- imported before the child
    code = code_guard.snapshot()
    tmp = tempfile.TemporaryDirectory(prefix="shardproof-trace-")
    d = Path(tmp.name)
    (d / "source").write_bytes(source)
    with open(d / "stderr", "wb") as err:
        try:
            proc = subprocess.Popen(
                _command("trace" if lint else "retrace", frontend, str(path), str(d / "source"),
                         str(d / "out.json")),
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
        except OSError as e:
            tmp.cleanup()
            raise TraceFailed("child", f"cannot start the tracing process: {e}") from None
    return PendingTrace(str(path), frontend, timeout_s, proc, tmp, time.monotonic(), code=code)


def trace_in_child(path: str | Path, source: bytes, *, frontend: str = "dsl",
                   timeout_s: float = TRACE_TIMEOUT_S, check_types: bool = True
                   ) -> tuple[Any, PendingTrace]:
    """Trace in a child and wait: ``(ProblemData, the finished PendingTrace)`` (its ``seconds``
    and the child's ``stderr``). ``check_types``: typecheck the returned nodes and their sizes.

    Raises:
        TraceFailed: see the class.
    """
    pending = start_trace(path, source, frontend=frontend, timeout_s=timeout_s)
    pending.check_types = check_types
    return pending.result(), pending


# -- checking in the child -----------------------------------------------------------------------
@dataclass
class CheckOutcome:
    """``check-certificate``'s exit code, its ``--json`` answer (None if it gave none), its last
    stderr line and the seconds it took."""

    code: int
    answer: dict[str, Any] | None
    error: str
    seconds: float


def check_in_child(certificate: str | Path, plan: str | Path, *, timeout_s: float,
                   smt_timeout_s: float = 60.0, trace_timeout_s: float = TRACE_TIMEOUT_S
                   ) -> CheckOutcome:
    """Run ``check-certificate CERT --plan PLAN --json`` in a fresh interpreter.

    A checker that runs past ``timeout_s`` or dies on a signal gives code 2 (no verdict)."""
    t0 = time.monotonic()
    cmd = _command("check", os.path.abspath(certificate), "--plan", str(plan), "--json",
                   "--timeout", f"{smt_timeout_s:g}", "--trace-timeout", f"{trace_timeout_s:g}")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return CheckOutcome(2, None, f"the checker did not finish within {timeout_s:g} s",
                            time.monotonic() - t0)
    finally:
        _kill(proc)
    return _outcome(proc.returncode, out, err, time.monotonic() - t0)


def _outcome(rc: int, out: bytes, err: bytes, seconds: float) -> CheckOutcome:
    """The checker's answer: its last stdout line as JSON, its code (2 when it died on a
    signal), its last stderr line."""
    answer = None
    lines = [x for x in out.decode(errors="replace").splitlines() if x.strip()]
    if lines:
        try:
            a = json.loads(lines[-1])
            answer = a if isinstance(a, dict) else None
        except ValueError:
            answer = None
    code = rc if rc >= 0 else 2
    error = _last_line(err.decode(errors="replace"))
    if rc < 0:
        error = f"the checker died on signal {-rc}" + (f" ({error})" if error else "")
    return CheckOutcome(code, answer, error, seconds)


@dataclass
class PendingCheck:
    """``prove``'s self-check started before its certificate exists (:func:`start_check`)."""

    proc: subprocess.Popen
    out: Any            # the child's stdout and stderr (files: it runs while prove works)
    err: Any
    timeout_s: float
    code: Any           # proofs.code_guard.snapshot() taken before the child started

    def run(self) -> CheckOutcome:
        """Tell the checker the certificate is written and wait for its answer, at most
        ``timeout_s`` from now (past it, or on a signal: code 2, no verdict). A change to the
        product's files while it ran (its re-trace runs the plan) is code 2 too."""
        from proofs.code_guard import CodeChanged, compare

        t0 = time.monotonic()
        try:
            self.proc.stdin.write(b"certificate written\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass          # it has ended already: its code and output are read below
        try:
            rc = self.proc.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            self.abort()
            return CheckOutcome(2, None, f"the checker did not finish within "
                                         f"{self.timeout_s:g} s", time.monotonic() - t0)
        seconds = time.monotonic() - t0
        _kill(self.proc)
        self.out.seek(0)
        self.err.seek(0)
        out, err = self.out.read(), self.err.read()
        self.abort()
        try:
            compare(self.code)
        except CodeChanged as e:
            return CheckOutcome(2, None, f"while the checker ran: {e}", seconds)
        return _outcome(rc, out, err, seconds)

    def abort(self) -> None:
        """End the checker without a verdict: close its stdin (waiting for it, it stops its
        re-trace and exits; checking, it is sent SIGTERM, which does the same), then end its
        process group; a no-op once it has ended."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        if self.proc.poll() is None:   # checking already: SIGTERM ends it and its re-trace
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        _kill(self.proc)
        self.out.close()
        self.err.close()


def start_check(certificate: str | Path, plan: str | Path, *, name: str, frontend: str,
                timeout_s: float, smt_timeout_s: float = 60.0,
                trace_timeout_s: float = TRACE_TIMEOUT_S) -> PendingCheck:
    """Start ``check-certificate CERT --plan PLAN --json --await-certificate FRONTEND:NAME`` in a
    fresh interpreter before ``CERT`` exists: it starts up and re-traces ``PLAN`` while
    ``prove`` works, and reads ``CERT`` only after :meth:`PendingCheck.run`. Every path of
    ``prove`` that does not run it calls :meth:`PendingCheck.abort`.

    Raises:
        OSError: the child cannot start.
    """
    from proofs import code_guard

    code = code_guard.snapshot()
    # absolute: a relative path starting with '-' would be read as an option (R31b-3)
    cmd = _command("check", os.path.abspath(certificate), "--plan", str(plan), "--json",
                   "--timeout", f"{smt_timeout_s:g}", "--trace-timeout", f"{trace_timeout_s:g}",
                   "--await-certificate", f"{frontend}:{name}")
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err,
                            start_new_session=True)
    return PendingCheck(proc, out, err, timeout_s, code)


# -- the child -----------------------------------------------------------------------------------
def _load_dsl(path: str, source: bytes) -> Any:
    from spec_lang.load import load

    return load(path, source=source)


def _load_torch(path: str, source: bytes) -> Any:
    from spec_lang.torch_frontend import load

    return load(path, source=source)


FRONTENDS: dict[str, Callable[[str, bytes], Any]] = {"dsl": _load_dsl, "torch": _load_torch}


def _write(out: str, doc: dict[str, Any]) -> None:
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(doc, separators=(",", ":")))
    os.replace(tmp, out)


def _trace_child(frontend: str, path: str, source_file: str, out: str, lint: bool) -> int:
    os.dup2(2, 1)                  # the plan's prints go to stderr, never into the result
    sys.stdout = sys.stderr
    # before any of the plan's code: writes only beneath the trace's directory (proofs/sandbox.py;
    # TMPDIR there, for the front end's own workers), where the kernel offers Landlock
    from proofs.sandbox import restrict_writes

    here = os.path.dirname(os.path.abspath(out))
    os.environ["TMPDIR"] = here
    tempfile.tempdir = None
    if os.environ.get("SHARDPROOF_SANDBOX") != "off":   # the user's opt-out (docs/trusted-base.md)
        restrict_writes([here])
    t0 = time.monotonic()
    from proofs.kernel import paused_gc
    from proofs.problem_data import problem_to_data
    from spec_lang.errors import SpecLangError
    from spec_lang.partial import LINT

    LINT[0] = lint
    source = Path(source_file).read_bytes()
    t1 = time.monotonic()
    try:
        problem = FRONTENDS[frontend](path, source)
    except SpecLangError as e:     # messages start with the user's file:line
        msg = _one_line(str(e), 2000)
        _write(out, {"error": {"kind": "plan",
                               "message": msg if ":" in msg.split(" ", 1)[0]
                               else f"{path}:1: {msg}"}})
        return 0
    except Exception as e:  # noqa: BLE001 -- the front end's own failure: never a verdict
        import traceback

        tb = traceback.extract_tb(e.__traceback__)
        where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        _write(out, {"error": {"kind": "internal",
                               "message": f"{type(e).__name__}: {_one_line(str(e))}{where}"}})
        return 0
    t2 = time.monotonic()
    try:
        with paused_gc():
            data = problem_to_data(problem, frontend)
        data["seconds"] = {"import": f"{t1 - t0:.3f}", "trace": f"{t2 - t1:.3f}",
                           "serialise": f"{time.monotonic() - t2:.3f}"}
    except Exception as e:  # noqa: BLE001
        _write(out, {"error": {"kind": "internal",
                               "message": f"serialising the problem: {type(e).__name__}: "
                                          f"{_one_line(str(e))}"}})
        return 0
    _write(out, {"problem": data})
    return 0


def child_main(argv: list[str]) -> int:
    """Entry point of the child interpreter: ``trace FRONTEND PATH SOURCE OUT`` (``retrace``:
    the same without the lint) or ``check ...`` (``check-certificate``'s arguments)."""
    if argv[:1] in (["trace"], ["retrace"]) and len(argv) == 5 and argv[1] in FRONTENDS:
        if argv[1] == "dsl":
            fewer_gc_passes()
        rc = _trace_child(*argv[1:], lint=argv[0] == "trace")
        # the problem is written: end without the interpreter's teardown (torch, its modules
        # and the 8B TP8's 18 traces: ~1 CPU s; DeepSeek-V3's DSL terms: 0.6-1.5 s, on the
        # check's critical path), which would run only the plan file's exit handlers and
        # finalizers (as the capture children do, worker.run)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    if argv[:1] == ["check"]:
        from proofs.cli import check_main

        fewer_gc_passes()
        return check_main(argv[1:])
    print(f"proofs.isolation: bad arguments {argv[:3]}", file=sys.stderr)
    return 3
