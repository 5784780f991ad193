"""The code a verdict depends on, unchanged by the plan's child (adversarial finding 1, issue 10
family 6).

A plan file runs in a child interpreter (:mod:`proofs.isolation`) as the same OS user, so it can
write files: a plan that creates ``proofs/prover/__init__.py`` shadows ``proofs/prover.py`` for
the parent's *later* imports and decides ``prove``'s verdict; a ``.pth`` file in site-packages
runs code in every later interpreter (``prove``'s self-check). The parent therefore records,
before it starts the child, the ``(mtime_ns, size, inode)`` of:

* every file of a module already imported (``sys.modules``: the parent imports what decides
  the verdict first, so their files are covered), and the directories holding them;
* every file and directory of this installation's packages (``proofs``, ``rewriting``,
  ``spec_lang``): a new file in one changes its directory's mtime;
* every entry at the top of each ``sys.path`` directory (a new ``.pth`` file or a package that
  would shadow another changes the directory's mtime and adds an entry).

After the child and its process group end, the same record is taken again; any difference is a
refusal (:class:`CodeChanged`), never a verdict. Stat calls only: a few thousand, ~10 ms.

What this does not cover (``docs/trusted-base.md``): files of modules neither process imported
before the child started, deep inside site-packages, that a *later* import loads; a process the
plan detached from its session that writes after the check. Running ``prove`` and
``check-certificate`` on a read-only installation (a container, another user) closes both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["CodeChanged", "snapshot", "compare"]

_PACKAGES = ("proofs", "rewriting", "spec_lang")
_ROOT = Path(__file__).resolve().parents[1]

Stamp = tuple[int, int, int] | None


class CodeChanged(Exception):
    """A file the verdict's code is loaded from changed while the plan's child ran."""


def _stat(p: str) -> Stamp:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _paths() -> set[str]:
    out: set[str] = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str):
            out.add(f)
            out.add(os.path.dirname(f))
    for pkg in _PACKAGES:
        base = _ROOT / pkg
        if base.is_dir():
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                out.add(dirpath)
                out.update(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
    for d in sys.path:
        if d and os.path.isdir(d):
            out.add(d)
            try:
                out.update(e.path for e in os.scandir(d))
            except OSError:
                pass
    return out


def snapshot() -> dict[str, Stamp]:
    """``{path: (mtime_ns, size, inode) or None}`` of the files and directories above."""
    return {p: _stat(p) for p in _paths()}


def compare(before: dict[str, Stamp]) -> None:
    """Raise :class:`CodeChanged` naming the first recorded path that differs from ``before``
    (changed or removed; an entry added to a recorded directory changes the directory's
    mtime). Paths first imported after ``before`` was taken are not compared: they existed."""
    for p in sorted(before):
        if before[p] != _stat(p):
            raise CodeChanged(f"{p} changed while the plan file ran in its tracing process: a "
                              "plan must not write into the installation (run on a read-only "
                              "install to rule this out)")
