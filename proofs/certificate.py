"""Certificates: the proof-step table the prover builds, and the atomic JSON writer.

A certificate (``docs/certificate.md``, schema ``docs/certificate.schema.json``) holds a
hash-consed node table (:mod:`proofs.kernel`), a table of proof *steps*, and one *obligation*
per goal pointing at the step that proves ``expected == actual``. Every step proves an equation
``lhs == rhs`` between two nodes:

=========  ==========================================================================
``refl``   ``lhs`` is ``rhs``
``rule``   one rewrite-rule instance: ``rule`` (name), ``subst`` (variable -> node or attr)
``congr``  same op, attrs on both sides; ``args[k]`` proves child ``k`` equal (null: same child)
``trans``  ``steps`` chain ``lhs == ... == rhs``
``sym``    ``of`` proves ``rhs == lhs``
``smt``    z3 answered ``unsat`` to the query regenerated from ``lhs``, ``rhs`` and ``binding``
``cas``    an exact rational identity of the two sides' atoms (sympy, re-derived by the checker)
=========  ==========================================================================

Steps refer only to earlier steps, so the checker replays the table in one pass.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proofs.kernel import NodeTable, encode_attr

__all__ = ["FORMAT", "FORMAT_VERSION", "ProofSteps", "write_certificate", "encode_subst",
           "unwritable"]

FORMAT = "shardproof-certificate"
FORMAT_VERSION = 3


def encode_subst(subst: Mapping[str, Any], node_of) -> dict[str, Any]:
    """Substitution as JSON: a term becomes ``{"node": id}`` (``node_of(term)``); others attrs."""
    out: dict[str, Any] = {}
    for k, v in subst.items():
        if hasattr(v, "op") and hasattr(v, "args") and hasattr(v, "dims"):
            out[str(k)] = {"node": node_of(v)}
        elif isinstance(v, (list, tuple)) and v and all(hasattr(x, "op") for x in v):
            out[str(k)] = {"nodes": [node_of(x) for x in v]}
        else:
            out[str(k)] = encode_attr(v)
    return out


class ProofSteps:
    """The step table, hash-consed (an identical step is stored once)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self._index: dict[str, int] = {}

    def _add(self, step: dict[str, Any]) -> int:
        key = json.dumps(step, sort_keys=True)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.steps)
            self.steps.append(step)
        return i

    def lhs(self, s: int) -> int:
        return self.steps[s]["lhs"]

    def rhs(self, s: int) -> int:
        return self.steps[s]["rhs"]

    def refl(self, n: int) -> int:
        return self._add({"kind": "refl", "lhs": n, "rhs": n})

    def rule(self, name: str, subst: dict[str, Any], lhs: int, rhs: int) -> int:
        return self._add({"kind": "rule", "rule": name, "subst": subst, "lhs": lhs, "rhs": rhs})

    def congr(self, lhs: int, rhs: int, args: list[int | None]) -> int:
        if lhs == rhs:
            return self.refl(lhs)
        return self._add({"kind": "congr", "lhs": lhs, "rhs": rhs, "args": args})

    def trans(self, steps: list[int]) -> int:
        given = list(steps)
        steps = [s for s in steps if self.steps[s]["kind"] != "refl"]
        if not steps:
            if not given:
                raise ValueError("trans of no steps")
            return given[0]   # a chain of refl steps (both sides the same node)
        if len(steps) == 1:
            return steps[0]
        flat: list[int] = []
        for s in steps:
            if self.steps[s]["kind"] == "trans":
                flat.extend(self.steps[s]["steps"])
            else:
                flat.append(s)
        return self._add({"kind": "trans", "lhs": self.lhs(flat[0]), "rhs": self.rhs(flat[-1]),
                          "steps": flat})

    def chain(self, start: int, steps: list[int]) -> int:
        """``start == ... ``: a trans of ``steps``, or refl when there are none."""
        real = [s for s in steps if self.steps[s]["kind"] != "refl"]
        return self.trans(real) if real else self.refl(start)

    def sym(self, s: int) -> int:
        st = self.steps[s]
        if st["kind"] == "refl":
            return s
        if st["kind"] == "sym":
            return st["of"]
        return self._add({"kind": "sym", "lhs": st["rhs"], "rhs": st["lhs"], "of": s})

    def rename(self, lhs: int, rhs: int, of: int) -> int:
        """``lhs == rhs`` is a bijective renaming of the inputs of what step ``of`` proves."""
        return self._add({"kind": "rename", "lhs": lhs, "rhs": rhs, "of": of})

    def cut(self, lhs: int, rhs: int, lemma: int,
            cuts: list[tuple[int, int, int, int, int]]) -> int:
        """``lhs == rhs`` from the lemma step and one premise step per cut ``(spec, plan, var,
        embed, premise)`` (proofs/cut.py; checked by proofs/checker.py)."""
        return self._add({"kind": "cut", "lhs": lhs, "rhs": rhs, "lemma": lemma,
                          "cuts": [{"spec": s, "plan": p, "var": v, "embed": m, "premise": q}
                                   for s, p, v, m, q in cuts]})

    def cas(self, lhs: int, rhs: int) -> int:
        return self._add({"kind": "cas", "lhs": lhs, "rhs": rhs})

    def smt(self, lhs: int, rhs: int, binding: Mapping[str, int], smt2: str, answer: str,
            solver: str) -> int:
        return self._add({"kind": "smt", "lhs": lhs, "rhs": rhs, "binding": dict(binding),
                          "smt2": smt2, "answer": answer, "solver": solver})


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_certificate(path: str | Path, cert: dict[str, Any]) -> None:
    """Write ``cert`` as JSON with sorted keys, atomically (temp file + ``os.replace``); gzip-
    compressed when ``path`` ends in ``.gz`` (level 6, no timestamp, OS byte 255: the same
    bytes for the same certificate on every Python). ``check-certificate`` reads both
    (``proofs/checker_load.py``)."""
    path = Path(path)
    data = (json.dumps(cert, sort_keys=True, separators=(",", ":")) + "\n").encode()
    # (json.dumps is the C encoder; json.dump streams through the pure-Python one: 5x)
    if path.suffix == ".gz":   # OS byte 255 ("unknown"): Pythons differ (round 51b, R51b-2)
        data = gzip.compress(data, compresslevel=6, mtime=0)
        data = data[:9] + b"\xff" + data[10:]
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes 0600; a certificate is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def node_table_json(table: NodeTable) -> list:
    return table.to_json()


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


def ruleset_info() -> dict[str, str]:
    """Name, version and sha256 of the producer's rule table (``rewriting.RULESET``)."""
    try:
        from rewriting import RULESET
    except ImportError:
        from proofs.checker_rules import RULESET
    return {k: str(RULESET[k]) for k in ("name", "version", "sha256")}


def certificate_of(report: Any) -> dict[str, Any]:
    """The certificate of a :class:`proofs.prover.Report` (``docs/certificate.md``)."""
    from proofs.kernel import node_hash_table, roots_hash, spec_binding

    t = report.table
    node = report.node_of
    hashes = node_hash_table(t)
    obligations = []
    for g in report.goals:
        e, a = node[id(g.expected)], node[id(g.actual)]
        o: dict[str, Any] = {
            "name": g.name, "kind": g.kind, "layer": g.layer, "site": g.site,
            "placement": g.placement, "expected": e, "actual": a,
            "expected_sha256": hashes[e], "actual_sha256": hashes[a],
        }
        if g.status == "proved":
            o["method"] = g.method
            if g.method == "reused":
                o["reuses"] = g.reuses
            else:
                o["proof"] = g.proof
        else:
            o["method"] = "refuted" if g.status == "refuted" else "open"
            o["reason"] = g.reason or "not proved"
        obligations.append(o)
    p = report.problem
    plan_path = str(getattr(p, "path", report.path))
    plan_sha = getattr(p, "source_sha256", "") or (
        sha256_file(plan_path) if Path(plan_path).is_file() else "0" * 64)
    import z3

    binding = {k: int(v) for k, v in report.binding.items()}
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "verdict": report.verdict,
        "tools": {"shardproof": _version("shardproof"), "egglog": _version("egglog"),
                  "z3": z3.get_version_string(), "python": sys.version.split()[0]},
        "ruleset": ruleset_info(),
        "plan": {"path": plan_path, "sha256": plan_sha,
                 "frontend": str(getattr(p, "frontend", "dsl"))},
        "spec_sha256": roots_hash(hashes, [(o["name"], o["expected"]) for o in obligations],
                                  spec_binding(binding)),
        "plan_sha256": roots_hash(hashes, [(o["name"], o["actual"]) for o in obligations],
                                  binding),
        "assumptions": list(report.assumptions),
        # spec denominators assumed nonzero, each with its proof d == nf (proofs/checker_signs.py)
        **({"denominators": list(report.denominators)}
           if getattr(report, "denominators", None) else {}),
        "binding": binding,
        "reduced_binding": {k: int(v) for k, v in report.reduced.items()},
        "nodes": t.to_json(),
        "steps": report.steps.steps,
        "obligations": obligations,
        "counterexample": report.counterexample.to_json() if report.counterexample else None,
        "summary": report.counts,
        "rule_counts": dict(sorted(report.rule_counts.items())),
        "seconds": {k: f"{v:.3f}" for k, v in report.seconds.items()},
    }


def unwritable(certificate: str, plan: str | Path | None = None) -> str | None:
    """Why ``--certificate`` cannot be written, checked before proving (None: it can): an empty
    path, a directory or another non-regular file, the plan file itself (R31b-4), a missing
    directory, or a directory where a file cannot be created (probed with a temporary file, as
    the atomic write will do)."""
    if not certificate.strip():
        return "--certificate: empty path; give a file name, e.g. --certificate out.json"
    target = Path(certificate)
    if plan is not None and target.exists() and os.path.samefile(target, plan):
        return f"{certificate}: is the plan file; give another path for the certificate"
    if target.is_dir():
        return f"{certificate}: is a directory; give a file path for the certificate"
    if target.exists() and not target.is_file():
        return f"{certificate}: not a regular file; give a file path for the certificate"
    parent = target.resolve().parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        return f"{certificate}: {parent} {what}"
    try:
        fd, probe = tempfile.mkstemp(prefix=target.name + ".", suffix=".probe", dir=parent)
    except OSError as e:
        return f"{certificate}: cannot write in {parent}: {e.strerror or e}"
    os.close(fd)
    os.unlink(probe)
    return None
