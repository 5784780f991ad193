"""The code a verdict depends on, unchanged by the plan's child (adversarial finding 1, issue 10
family 6).

A plan file runs in a child interpreter (:mod:`proofs.isolation`) as the same OS user, so it can
write files: a plan that creates ``proofs/prover/__init__.py`` shadows ``proofs/prover.py`` for
the parent's *later* imports and decides ``prove``'s verdict; a ``.pth`` file in site-packages
runs code in every later interpreter (``prove``'s self-check). The parent therefore records,
before it starts the child, the ``(mtime_ns, size, inode)`` of:

* every file of a module already imported (``sys.modules``: the parent imports what decides
  the verdict first, so their files are covered), and the directories holding them;
* every ``.py`` file and subdirectory of this installation's packages (``proofs``,
  ``rewriting``, ``spec_lang``): a new one is listed after and not before;
* in each ``sys.path`` directory, the ``.pth`` files and the entries named like an imported
  top-level module (a new ``z3/`` that would shadow site-packages' ``z3``);
* the certificate schema the checker reads (``proofs/`` and ``docs/certificate.schema.json``).

After the child and its process group end, the same record is taken again; any difference is a
refusal (:class:`CodeChanged`), never a verdict. A directory is recorded by its inode only: its
mtime changes whenever anything is created in it, and another process's first import creates
``__pycache__`` there legitimately (stop 19's CI: two concurrent workers on a fresh clone).

Bytecode caches are code too: a forged ``__pycache__/checker.cpython-311.pyc`` whose header
matches the source's mtime and size would be loaded by ``prove``'s self-check process. They are
not compared (a concurrent interpreter writes a valid one whenever it is missing) but
*removed*: every cache file in this installation's packages that appeared or changed, and the
cache file of every imported module that changed, is deleted after the child ends, so the next
interpreter compiles that module from its (compared) source. Stat calls only: a few thousand,
~10 ms.

Where the kernel offers Landlock, the child cannot write outside its trace directory at all
(:mod:`proofs.sandbox`); this module is the second line there and the only one elsewhere. What
this does not cover without the sandbox (``docs/trusted-base.md``, adversarial round 2): files of modules neither process imported
before the child started, deep inside site-packages, that a *later* import loads; a process the
plan detached from its session that writes after the check. Running ``prove`` and
``check-certificate`` on a read-only installation (a container, another user) closes both.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CodeChanged", "Snapshot", "snapshot", "compare"]

_PACKAGES = ("proofs", "rewriting", "spec_lang")
_ROOT = Path(__file__).resolve().parents[1]

Stamp = tuple[int, int, int, int] | None


class CodeChanged(Exception):
    """A file the verdict's code is loaded from changed while the plan's child ran."""


def _stat(p: str) -> Stamp:
    """``(mtime_ns, size, inode, ctime_ns)`` of a file, ``(0, 0, inode, 0)`` of a directory,
    None if absent."""
    try:
        st = os.stat(p)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return (0, 0, st.st_ino, 0)
    # ctime too: a rewrite in place that restores the size and the mtime (os.utime) still moves
    # it (adversarial finding R2-4)
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def _caches(cached: frozenset[str]) -> dict[str, Stamp]:
    """Stamps of the bytecode caches: every file in the ``__pycache__`` directories of this
    installation's packages, and ``cached`` (the imported modules' ``__cached__`` paths)."""
    out = {p: _stat(p) for p in cached}
    for pkg in _PACKAGES:
        for dirpath, _dirs, filenames in os.walk(_ROOT / pkg):
            if os.path.basename(dirpath) == "__pycache__":
                out.update((os.path.join(dirpath, f), None) for f in filenames)
    for p in list(out):
        if out[p] is None:
            out[p] = _stat(p)
    return out


def _listing(top: frozenset[str]) -> set[str]:
    """Paths found by listing: this installation's ``.py`` files and subdirectories (a new
    ``proofs/prover/`` shadows ``proofs/prover.py``); in each ``sys.path`` directory, the
    ``.pth`` files and the entries named like a top-level module in ``top`` (``z3``, ``z3.py``,
    ``numpy``...). Listings, not directory mtimes: files an unrelated process writes beside them
    (a certificate, a results directory, a test's output) are not watched."""
    out: set[str] = set()
    # the certificate schema the checker reads (finding R2-5)
    out.update(str(_ROOT / d / "certificate.schema.json") for d in ("proofs", "docs"))
    for pkg in _PACKAGES:
        base = _ROOT / pkg
        if base.is_dir():
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                out.update(os.path.join(dirpath, d) for d in dirnames)
                out.update(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
    for d in sys.path:
        if d and os.path.isdir(d):
            try:
                out.update(e.path for e in os.scandir(d)
                           if e.name.endswith(".pth") or e.name.split(".")[0] in top)
            except OSError:
                pass
    return out


@dataclass(frozen=True)
class Snapshot:
    """What :func:`snapshot` recorded: ``top`` the top-level names of the imported modules,
    ``stamps`` the source files and listed paths, ``cached`` the imported modules' bytecode
    cache paths, ``caches`` the stamps of :func:`_caches`."""

    top: frozenset[str]
    stamps: dict[str, Stamp]
    cached: frozenset[str]
    caches: dict[str, Stamp]


def snapshot() -> Snapshot:
    """Record the imported modules' files, :func:`_listing`'s paths and the bytecode caches."""
    top = frozenset(n.split(".")[0] for n in list(sys.modules))
    paths = _listing(top)
    cached: set[str] = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str):
            paths.add(f)
        c = getattr(m, "__cached__", None)
        if isinstance(c, str):
            cached.add(c)
    frozen = frozenset(cached)
    return Snapshot(top, {p: _stat(p) for p in paths}, frozen, _caches(frozen))


def compare(before: Snapshot) -> list[str]:
    """Raise :class:`CodeChanged` naming the first recorded path that changed or disappeared
    since ``before``, or a path the same listing finds now and did not then. Modules first
    imported after ``before`` are not compared: they existed, and were not listed. Then delete
    the bytecode caches that appeared or changed (see the module docstring).

    Returns:
        The cache files deleted, sorted.
    """
    for p in sorted(before.stamps):
        if before.stamps[p] != _stat(p):
            raise CodeChanged(_message(p, "changed"))
    for p in sorted(_listing(before.top) - set(before.stamps)):
        raise CodeChanged(_message(p, "appeared"))
    removed = []
    for p, st in sorted(_caches(before.cached).items()):
        if st is not None and before.caches.get(p) != st:
            try:
                os.unlink(p)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise CodeChanged(f"{p} changed while the plan file ran and cannot be removed "
                                  f"({e.strerror}): a plan must not write into the "
                                  "installation") from None
            removed.append(p)
    return removed


def _message(p: str, what: str) -> str:
    return (f"{p} {what} while the plan file ran in its tracing process: a plan must not write "
            "into the installation (run on a read-only install to rule this out)")
