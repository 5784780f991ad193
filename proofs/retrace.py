"""The checker's re-trace: tie a certificate to its plan file (issue 10, family 5).

Part of the checker's trusted base. The certificate names its plan file (``plan.path``, or the
checker's ``--plan``), the file's sha256 and the front end that traced it. The checker reads the
file, compares its hash, and has it traced in a separate clean interpreter
(:mod:`proofs.isolation`) *while it replays the steps*; only data comes back. It then checks, on
that data, with its own code:

* the plan's goals are the certificate's obligations (same names) and each obligation's
  ``expected`` / ``actual`` node has the Merkle hash of the re-traced term (hashes recomputed
  here from the returned node table, never taken from the tracer);
* the re-traced binding is the certificate's;
* an EQUIVALENT certificate has no plan output the front end could not lower (``prove --torch``:
  an op without a lowering rule leaves its outputs out of the obligations, listed as
  ``unsupported``);
* the RNG obligation (``proofs/rng.py``) holds on the re-traced dropout records.

Without the plan file a certificate is not tied to a plan: the checker rejects it unless the
caller asked for ``--no-retrace`` (``retrace=False``). Re-tracing runs the file, so a file the
certificate names (rather than the user, with ``--plan``) is run only when it lies inside the
working directory or the certificate's directory; otherwise the certificate is rejected as not
tied, with a hint to name the plan with ``--plan``.
"""

from __future__ import annotations

import hashlib
import os
import select
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proofs.errors import CertificateError
from proofs.isolation import PendingTrace, TraceFailed, start_trace
from proofs.kernel import node_hash_table

__all__ = ["plan_file", "start_retrace", "finish_retrace", "EarlyRetrace",
           "await_certificate", "speculative_retrace"]


def plan_file(cert: Mapping[str, Any], cert_path: str | Path,
              plan_path: str | Path | None) -> Path:
    """The plan file: ``plan_path``, else the recorded path (as given, or beside the cert)."""
    p = Path(plan_path or cert["plan"]["path"])
    if not p.is_absolute() and not p.exists():
        p = Path(cert_path).resolve().parent / p
    return p


def _near(p: Path, cert_path: str | Path) -> bool:
    """``p`` resolves inside the working directory or the certificate's directory."""
    real = p.resolve()
    return any(real.is_relative_to(d) for d in (Path.cwd().resolve(),
                                                 Path(cert_path).resolve().parent))


def start_retrace(cert: Mapping[str, Any], cert_path: str | Path,
                  plan_path: str | Path | None, timeout_s: float) -> PendingTrace:
    """Read the plan file, check its hash and start tracing it in a child.

    Raises:
        CertificateError: no plan file (the certificate is not tied to a plan), an unreadable
            one, a hash that is not ``plan.sha256``, or a child that cannot start.
    """
    data = _plan_bytes(cert, cert_path, plan_path)
    return _start(cert["plan"]["path"], data, cert["plan"]["frontend"], timeout_s)


def _plan_bytes(cert: Mapping[str, Any], cert_path: str | Path,
                plan_path: str | Path | None) -> bytes:
    """The plan file's bytes, read now; they must hash to the certificate's ``plan.sha256``.

    Raises:
        CertificateError: see :func:`start_retrace`.
    """
    p = plan_file(cert, cert_path, plan_path)
    if not p.is_file():
        raise CertificateError(
            f"the certificate is not tied to a plan: plan file {str(p)!r} not found (give "
            f"--plan PLAN.py, or --no-retrace to check the certificate alone)")
    if plan_path is None and not _near(p, cert_path):
        # the certificate, not the user, names this file, and re-tracing runs it
        raise CertificateError(
            f"the certificate is not tied to a plan: it names plan file {str(p)!r}, outside the "
            f"working directory and the certificate's directory; re-tracing runs that file, so "
            f"name it yourself with --plan (or --no-retrace to check the certificate alone)")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise CertificateError(f"--retrace: cannot read the plan {p}: {e.strerror}") from None
    if hashlib.sha256(data).hexdigest() != cert["plan"]["sha256"]:
        raise CertificateError(f"--retrace: {p} does not hash to plan.sha256: the plan file "
                               f"changed since the certificate was made, or it is another "
                               f"plan (the certificate names {cert['plan'].get('path')!r})")
    return data


def _start(name: str, data: bytes, frontend: str, timeout_s: float) -> PendingTrace:
    """Trace ``data`` (the plan file's bytes, the checker's own read) under the name ``name``."""
    # everything the checker may import while the child runs is imported before it starts
    # (finding R2-3: a z3.py the re-traced plan wrote was imported at the first smt step)
    import jsonschema  # noqa: F401
    import numpy  # noqa: F401
    import z3  # noqa: F401

    from proofs import admissible, cas, checker_refutation, replay, smt  # noqa: F401
    try:  # traced under the path prove was given (it names the file in sites and messages)
        pending = start_trace(name, data, frontend=frontend, timeout_s=timeout_s, lint=False)
    except TraceFailed as e:
        raise CertificateError(f"--retrace: {e}") from None
    pending.check_types = False   # its nodes are compared by hash with the checked table
    return pending


class EarlyRetrace:
    """The re-trace of ``prove``'s self-check, started before the certificate exists.

    ``prove`` starts ``check-certificate --await-certificate`` as it starts proving
    (:func:`proofs.isolation.start_check`): the checker reads the plan file it is given
    (``--plan``), starts tracing it and collects the trace while ``prove`` works, then waits
    for one line on stdin saying that the certificate is written (:meth:`wait`). Nothing else
    comes from ``prove``: the certificate is read after that line, every check of
    :func:`start_retrace` and :func:`finish_retrace` is made as without this, and
    :meth:`adopt` uses this trace only when the plan file read then has the very bytes traced,
    under the certificate's plan path and front end; otherwise the re-trace starts again.
    """

    SIGNAL = b"certificate written"

    def __init__(self, plan: str | Path, name: str, frontend: str, timeout_s: float,
                 data: bytes | None = None):
        self.plan, self.path, self.frontend, self.timeout_s = Path(plan), name, frontend, timeout_s
        self.parent = os.getppid()     # the process that will write the signal (prove)
        self.data: bytes | None = data   # the bytes to trace (read here when not given)
        self.pending: PendingTrace | None = None
        self.outcome: Any = None      # (ProblemData, node hashes) or the TraceFailed
        try:
            if self.data is None:
                self.data = self.plan.read_bytes()
            self.pending = _start(name, self.data, frontend, timeout_s)
        except (OSError, CertificateError):
            self.pending = None   # no early trace: adopt() starts one from the certificate

    def collect(self) -> None:
        """Wait for the tracing child (within its bound) and keep its data and node hashes, or
        why it failed."""
        if self.outcome is None and self.pending is not None:
            try:
                pd = self.pending.result()
                self.outcome = (pd, node_hash_table(pd.table))
            except TraceFailed as e:
                self.outcome = e

    def wait(self, fd: int) -> bool:
        """Block until the file descriptor ``fd`` gives the line :attr:`SIGNAL` (True) or
        anything else or end of file (False: ``prove`` gave up or died), collecting the
        trace as soon as its child ends or runs out of time."""
        buf = b""
        while b"\n" not in buf:
            p = self.pending
            busy = self.outcome is None and p is not None
            if busy and (p.proc.poll() is not None
                         or time.monotonic() - p.started > p.timeout_s):
                self.collect()
                busy = False
            if os.getppid() != self.parent:   # prove died and something still holds the pipe
                return False                  # (R31b-1)
            try:
                ready, _, _ = select.select([fd], [], [], 0.05 if busy else 1.0)
                chunk = os.read(fd, 4096) if ready else None
            except (OSError, ValueError):     # not a readable descriptor: no signal
                return False
            if ready:
                if not chunk:
                    return False
                buf += chunk
        return buf.split(b"\n", 1)[0] == self.SIGNAL

    def adopt(self, cert: Mapping[str, Any], cert_path: str | Path,
              plan_path: str | Path | None) -> Any:
        """The re-trace for ``cert``: this one when the plan file, read again now and checked
        as :func:`start_retrace` checks it, has the bytes traced, under the certificate's plan
        path and front end; else a fresh one (:func:`start_retrace`).

        Raises:
            CertificateError: see :func:`start_retrace`.
        """
        try:
            data = _plan_bytes(cert, cert_path, plan_path)
        except CertificateError:
            self.cancel()
            raise
        if (self.pending is not None and data == self.data and plan_path is not None
                and Path(plan_path) == self.plan and cert["plan"]["path"] == self.path
                and cert["plan"]["frontend"] == self.frontend):
            return self
        self.cancel()
        return _start(cert["plan"]["path"], data, cert["plan"]["frontend"], self.timeout_s)

    def cancel(self) -> None:
        """End the tracing child (and its process group); remove its directory."""
        if self.pending is not None:
            self.pending.cancel()


def speculative_retrace(plan: str | Path, cert_text: str,
                        timeout_s: float) -> EarlyRetrace | None:
    """``check-certificate CERT --plan PLAN``: start re-tracing ``PLAN`` before the certificate
    is parsed (parsing a frontier certificate takes about 1 s), but only when its text
    ``cert_text`` names the plan file's sha256 (so a file that is no certificate, or one of
    another plan, never runs PLAN: round 52b, R52b-1); None otherwise. The certificate's path
    and front end are guessed: PLAN as given, and the DSL front end when the file mentions
    ``spec_lang`` (else ``torch``). :meth:`EarlyRetrace.adopt` uses this trace only when the
    parsed certificate names that path and front end and the file, read again, still has the
    bytes traced; otherwise it starts a fresh re-trace."""
    try:
        data = Path(plan).read_bytes()
    except OSError:
        return None    # start_retrace reports it once the certificate is read
    if f'"sha256":"{hashlib.sha256(data).hexdigest()}"' not in cert_text:
        return None
    # the bytes hashed are the bytes traced (round 52c, R52c-1: not a second read)
    return EarlyRetrace(plan, str(plan), "dsl" if b"spec_lang" in data else "torch", timeout_s,
                        data)


def await_certificate(plan: str | Path, spec: str, timeout_s: float,
                      stdin: Any) -> EarlyRetrace | None:
    """``check-certificate --plan PLAN --await-certificate FRONTEND:NAME``: start the re-trace
    (:class:`EarlyRetrace`) and wait for the line on ``stdin``; None (nothing left running)
    when the input ends without it or is closed (R31b-2). From now on SIGTERM (``prove``'s
    abort) exits with code 2 through every ``finally``, which ends the re-trace's process
    group too.
    """
    try:
        fd = stdin.fileno()
    except (AttributeError, ValueError, OSError):   # no stdin: no signal can come
        return None
    frontend, _, name = spec.partition(":")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))
    early = EarlyRetrace(plan, name or str(plan), frontend, timeout_s)
    ok = False
    try:
        ok = early.wait(fd)
    finally:
        if not ok:
            early.cancel()
    return early if ok else None


def _collect(pending: Any) -> tuple[Any, list[str]]:
    """The child's data and the Merkle hash of each of its nodes (computed here).

    Raises:
        CertificateError: why the trace failed.
    """
    if isinstance(pending, EarlyRetrace):
        pending.collect()
        out = pending.outcome
    else:
        try:
            pd = pending.result()
            out = (pd, node_hash_table(pd.table))
        except TraceFailed as e:
            out = e
    if isinstance(out, TraceFailed):
        if out.kind == "plan":
            raise CertificateError(f"--retrace: the plan no longer traces: {out}") from None
        raise CertificateError(f"--retrace: {out}") from None
    return out


def finish_retrace(pending: Any, cert: Mapping[str, Any], hashes: list[str]) -> None:
    """Collect the child's data and compare it with the certificate (see the module docstring).

    Raises:
        CertificateError: one line naming the difference or why the trace failed.
    """
    pd, fresh = _collect(pending)
    goals = {g["name"]: g for g in pd.goals}
    ob = {o["name"]: o for o in cert["obligations"]}
    if set(goals) != set(ob):
        raise CertificateError(
            f"--retrace: the plan's goals differ from the certificate's (only in plan: "
            f"{sorted(set(goals) - set(ob))[:3]}, only in certificate: "
            f"{sorted(set(ob) - set(goals))[:3]})")
    for name, g in goals.items():
        for side in ("expected", "actual"):
            if fresh[g[side]] != hashes[ob[name][side]]:
                raise CertificateError(f"--retrace: goal {name}: the certificate's {side} "
                                       f"term is not the plan's")
    if pd.binding != cert["binding"]:
        raise CertificateError("--retrace: the binding differs from the plan's")
    obs = cert["obligations"]
    if cert["verdict"] == "UNKNOWN" and not pd.unsupported and obs \
            and all(o["method"] not in ("open", "refuted") for o in obs):
        # an UNKNOWN is consistent when a goal is open or the front end left an item open (an
        # output it could not lower, a rank literal, state the step leaves: adversarial round
        # 16, those UNKNOWNs were rejected as "every goal is proved", exit 4)
        raise CertificateError("--retrace: verdict UNKNOWN but every goal is proved and the "
                               "front end lowered every plan output")
    if pd.unsupported and cert["verdict"] == "EQUIVALENT":
        n, why = pd.unsupported[0]
        raise CertificateError(f"--retrace: verdict EQUIVALENT but the front end could not lower "
                               f"{len(pd.unsupported)} plan output(s) ({n}: {why})"[:400])
    if any(r["side"] == "plan" for r in pd.rng):
        from proofs.problem_data import to_problem

        _recheck_rng(cert, to_problem(pd, str(pending.path), cert["plan"]["sha256"]))


def _recheck_rng(cert: Mapping[str, Any], problem: Any) -> None:
    """The RNG obligation (proofs/rng.py), re-run on the re-traced dropout calls: an EQUIVALENT
    certificate needs mask terms that are a renaming of injective, consistent draws."""
    from proofs.reduction import reduce_binding
    from proofs.rng import check_rng

    roots = [t for g in problem.goals for t in (g.expected, g.actual)]
    for b in (reduce_binding(roots, problem.binding), problem.binding):
        r = check_rng(problem.rng, b, problem.mesh)
        if not r.checked:
            continue
        if not r.modelled:
            raise CertificateError(f"--retrace: rng: {r.why}")
        if r.collisions and cert["verdict"] == "EQUIVALENT":
            raise CertificateError(f"--retrace: rng: verdict EQUIVALENT but {r.collisions[0]}")
