"""Run Coq on an exported certificate and read back what Coq checked (docs/coq.md).

``coq_check(cert)`` exports the certificate (:mod:`proofs.coq_export`), compiles the Coq library
``proofs/coq`` once per version of its sources (cached), runs ``coqc`` on the exported file and
parses what Coq itself printed: the fingerprint of the certificate it decoded (compared with the
exporter's), the status of every obligation, the claims each proved obligation rests on, the
steps that did not check, and the axioms the theorem uses. Nothing here decides a verdict: a
status comes from Coq's output or the obligation counts as not Coq-checked.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofs.coq_export import COQ_DIR, CoqExport, export_certificate

__all__ = ["CoqMissing", "CoqFailed", "CoqReport", "coq_check", "build_library", "LIBRARY",
           "INSTALL_HINT"]

# Compilation order of the library (each file imports only earlier ones).
LIBRARY = ("Base", "Num", "Pow", "Term", "Props", "RuleLib", "Congr", "Rel", "Shard",
           "RulesBasic", "RulesLift", "RulesAxis", "RulesEinsum", "RulesPow", "RulesContent",
           "RulesScalarOut", "RulesLiftEinsum", "Positive", "Signs", "Canon", "RulesCanon",
           "RulesMerge", "RulesShift", "RulesActivation", "RulesOneHot", "RulesReduceMax", "RulesRadical",
           "RulesLiftReindex", "RulesEinsumMul", "RulesSplit",
           "RulesFactorOut", "RulesNested", "RulesCollect", "RulesReorder", "RulesGather", "RulesPerm",
           "RulesPermLift", "RulesTopk", "RulesPush", "RulesMove",
           "RulesUnit", "RulesOnline", "RulesUnitDim", "RulesComponents", "Rules",
           "Steps", "StepsSound", "Cert", "Decode")
INSTALL_HINT = ("coqc not found: Coq is optional; install it with `apt-get install -y coq` "
                "(Debian/Ubuntu, Coq 8.16) to Coq-check certificates")


class CoqMissing(RuntimeError):
    """``coqc`` is not installed (exit 3 with :data:`INSTALL_HINT`)."""


class CoqFailed(RuntimeError):
    """coqc failed on the library or the exported file, or its output is not what we wrote."""


@dataclass
class CoqReport:
    """What Coq checked, per obligation (names as in the certificate)."""

    export: CoqExport
    status: dict[str, str]                 # obligation -> "checked" | "claims" | "not checked"
    claims: dict[str, list[str]]           # obligation -> claims its Coq proof assumes
    why: dict[str, str]                    # obligation -> why it is not Coq-checked
    failed_steps: list[int]                # certificate step ids Coq's checker rejected
    axioms: list[str]
    seconds: dict[str, float] = field(default_factory=dict)   # export, library, coqc (wall),
    #                                                           coqc_cpu (user + system)
    peak_rss_mb: float = 0.0
    coq_file: str = ""

    @property
    def checked(self) -> int:
        return sum(v == "checked" for v in self.status.values())

    @property
    def rule_steps_checked(self) -> int:
        """Rule steps Coq's rule checkers accepted."""
        failed = set(self.failed_steps)
        return sum(1 for k in self.export.rule_step_ids if k not in failed)

    def summary(self) -> str:
        n = len(self.status) + len(self.export.not_exported)
        under = sum(v == "claims" for v in self.status.values())
        notc = n - self.checked - under
        return (f"Coq: {self.checked} of {n} obligations Coq-checked, {under} under stated "
                f"hypotheses, {notc} not Coq-checked; {self.rule_steps_checked} of "
                f"{self.export.rule_steps + len(self.export.opaque)} rule/smt/cas steps "
                f"checked by Coq lemmas ({len(self.export.opaque)} taken as hypotheses); "
                f"{len(self.failed_steps)} of {self.export.steps} steps rejected by Coq; "
                f"coqc {self.seconds.get('coqc', 0):.1f} s ({self.seconds.get('coqc_cpu', 0):.1f} s "
                f"CPU), peak RSS {self.peak_rss_mb:.0f} MB")


MEMORY_GB = float(os.environ.get("SHARDPROOF_COQ_MEMORY_GB", "6"))   # address space per coqc


def _limit_memory() -> None:      # preexec_fn of every coqc run: a runaway coqc fails, not the host
    lim = int(MEMORY_GB * 2**30)
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        lim = min(lim, hard)
    resource.setrlimit(resource.RLIMIT_AS, (lim, hard))


def coqc() -> str:
    path = shutil.which("coqc")
    if path is None:
        raise CoqMissing(INSTALL_HINT)
    return path


def _sources_key() -> str:
    h = hashlib.sha256()
    for name in LIBRARY:
        h.update(name.encode())
        h.update((COQ_DIR / f"{name}.v").read_bytes())
    try:
        ver = subprocess.run([coqc(), "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise CoqFailed(f"coqc --version failed: {e}") from None
    h.update(ver.encode())
    return h.hexdigest()[:16]


def build_library(cache: Path | None = None, timeout_s: float = 3600.0) -> tuple[Path, float]:
    """Compile ``proofs/coq`` into a cache directory (once per source version); returns the
    directory and the seconds spent compiling (0.0 when cached).

    Raises:
        CoqMissing: no coqc.  CoqFailed: a library file does not compile (a bug: CI compiles it).
    """
    root = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / \
        "shardproof" / "coq"
    out = root / _sources_key()
    if (out / "Decode.vo").exists():
        return out, 0.0
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:      # one build at a time (parallel test workers)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "Decode.vo").exists():
            return out, 0.0
        return out, _build(out, root, timeout_s)


def _build(out: Path, root: Path, timeout_s: float) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    t0 = time.monotonic()
    try:
        for name in LIBRARY:
            shutil.copy(COQ_DIR / f"{name}.v", tmp / f"{name}.v")
        for name in LIBRARY:
            r = subprocess.run([coqc(), "-q", "-Q", ".", "Shardproof", f"{name}.v"], cwd=tmp,
                               capture_output=True, text=True, timeout=timeout_s,
                               preexec_fn=_limit_memory)
            if r.returncode != 0:
                raise CoqFailed(f"the Coq library does not compile: {name}.v: "
                                f"{' '.join((r.stdout + r.stderr).split())[:400]}")
        try:
            os.replace(tmp, out)
        except OSError:           # another process built it first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return time.monotonic() - t0


_EVAL = re.compile(r"=\s*(.*?)\n\s*:\s*([^\n]*)", re.S)


def _parse_output(text: str) -> dict[str, Any]:
    # the four [Eval]s come before [Print Assumptions]'s answer; exactly four (a fifth one
    # would be code that is not the exporter's: adversarial finding R21-2)
    cut = min((k for k in (text.find("Axioms:"), text.find("Closed under the global context"))
               if k >= 0), default=len(text))
    evals = _EVAL.findall(text[:cut])
    if len(evals) != 4:
        raise CoqFailed(f"coqc printed {len(evals)} results, expected 4: {text[:300]!r}")
    (fp, t1), (codes, t2), (claims, t3), (failed, t4) = evals
    if (t1.strip(), t2.strip(), t4.strip()) != ("int", "list N", "list positive"):
        raise CoqFailed(f"unexpected coqc output types {t1!r} {t2!r} {t4!r}")
    out: dict[str, Any] = {
        "fingerprint": int(fp.replace("%uint63", "").strip()),
        "codes": [int(x) for x in re.findall(r"(\d+)%N", codes)],
        "failed": [int(x) for x in re.findall(r"(\d+)%positive", failed)],
        "claims": {},
    }
    for m in re.finditer(r"\((\d+)%N,\s*\[(.*?)\]\)", claims, re.S):
        out["claims"][int(m.group(1))] = [
            " ".join(c.split()) for c in re.findall(r"(C(?:NZ|NN)\s+\d+(?:%positive)?|"
                                                    r"CEq\s+\d+(?:%positive)?\s+\d+(?:%positive)?)",
                                                    m.group(2))]
    ax = text[text.find("Axioms:") + len("Axioms:"):] if "Axioms:" in text else ""
    # "name : type", or "name" alone with the type on indented lines below
    out["axioms"] = re.findall(r"^([A-Za-z_][\w.']*)\s+:", ax, re.M)
    if "Closed under the global context" in text:
        out["axioms"] = []
    return out


def _claim_text(c: str) -> str:
    nums = [int(x) - 1 for x in re.findall(r"\d+", c)]     # Coq numbers nodes from 1
    if c.startswith("CNZ"):
        return f"node {nums[0]} is non-zero"
    if c.startswith("CNN"):
        return f"node {nums[0]} is non-negative"
    return f"node {nums[0]} == node {nums[1]} (step not Coq-checked)"


def coq_check(cert: dict[str, Any], *, out_v: str | Path | None = None,
              cache: Path | None = None, timeout_s: float = 3600.0,
              label: str = "certificate") -> CoqReport:
    """Export ``cert``, run coqc on it and report what Coq checked.

    Raises:
        CoqMissing: coqc is not installed.
        CoqFailed: the library or the exported file does not compile, or Coq decoded another
            certificate than the one exported (fingerprint mismatch).
        proofs.coq_export.ExportError: the certificate cannot be exported.
    """
    t0 = time.monotonic()
    ex = export_certificate(cert, label=label)
    t_export = time.monotonic() - t0
    lib, t_lib = build_library(cache, timeout_s)
    work = Path(tempfile.mkdtemp(prefix="shardproof-coq-"))
    try:
        vfile = work / "Certificate.v"
        vfile.write_text(ex.source)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        before = ru0.ru_maxrss
        t1 = time.monotonic()
        try:
            r = subprocess.run([coqc(), "-q", "-Q", str(lib), "Shardproof", vfile.name],
                               cwd=work, capture_output=True, text=True, timeout=timeout_s,
                               preexec_fn=_limit_memory)
        except subprocess.TimeoutExpired:
            raise CoqFailed(f"coqc did not finish within {timeout_s:.0f} s") from None
        t_coq = time.monotonic() - t1
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rss = ru1.ru_maxrss
        cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        if r.returncode != 0:
            raise CoqFailed("coqc rejects the exported file: "
                            + " ".join((r.stdout + r.stderr).split())[:400])
        if out_v is not None:
            _atomic_write(Path(out_v), ex.source)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    got = _parse_output(r.stdout)
    if got["fingerprint"] != ex.fingerprint:
        raise CoqFailed(f"Coq decoded another certificate (fingerprint {got['fingerprint']} "
                        f"!= {ex.fingerprint})")
    if len(got["codes"]) != len(ex.obligations):
        raise CoqFailed(f"Coq reports {len(got['codes'])} obligations, {len(ex.obligations)} "
                        "were exported")
    status: dict[str, str] = {}
    claims: dict[str, list[str]] = {}
    why: dict[str, str] = dict(ex.not_exported)
    reasons = {1001: "the node table's order or analyses do not check",
               1002: "its proof step proves another equation",
               1003: "its proof step did not check in Coq",
               1004: "the renaming of the reused obligation did not check in Coq"}
    for k, (name, code) in enumerate(zip(ex.obligations, got["codes"])):
        if code == 0:
            status[name] = "checked"
        elif code == 1:
            status[name] = "claims"
            claims[name] = [_claim_text(c) for c in got["claims"].get(k, [])]
        else:
            status[name] = "not checked"
            why[name] = reasons.get(code, f"code {code}")
    for name in ex.not_exported:
        status.setdefault(name, "not checked")
    return CoqReport(ex, status, claims, why, [k - 1 for k in got["failed"]], got["axioms"],
                     {"export": t_export, "library": t_lib, "coqc": t_coq, "coqc_cpu": cpu},
                     max(rss, before) / 1024.0, str(out_v) if out_v else "")


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.resolve().parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
