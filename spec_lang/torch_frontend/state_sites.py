"""Where in the user's files a step changes the state an UNKNOWN names (issue 12 item 2).

:mod:`spec_lang.torch_frontend.step_state` says *what* one step leaves differently for the next
one ("the global _RNG of train.py", "module <model>._scale", "optimizer.param_groups[0]"); this
module finds *where*: the first line, inside ``train_step`` if there is one there, else inside
any function of the file, that writes the named thing -- an assignment or augmented assignment
to the name or attribute, an item assignment on it, a method called on it (``_RNG.random()``,
``cache.append(x)``), a call of it (``model.eval()``, ``torch.set_default_dtype``), or a
``setattr`` / ``delattr`` naming it. Lines at module level are the initial state, not a change
made by the step, and are never chosen. When nothing matches, the site is the line that defines
(or imports) ``train_step``, worded as such.

The files are read as text and parsed with :mod:`ast`; they are never executed here. A site is
for messages only: no verdict depends on it.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = ["state_site", "declaration_site"]

# what step_state / leftover name -> the identifiers a write of it would mention, in order
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"^the global (?P<n>\w+) of (?P<file>.+?)(?: \(as [\w.]+\))?$", "{n}"),
    (r"^the module (?P<n>[\w.]+)$", "{n}"),
    (r"^module \S+ class (?P<n>[\w.]+)$", "{n} type"),   # C.x = ... / type(m).x = ...
    (r"^module \S+ (?P<n>parameters|buffers|submodules)$", "{n}"),
    (r"^module \S*\.(?P<n>\w+)$", "{n}"),
    (r"^optimizer\.param_groups\[\d+\]$", "param_groups"),
    (r"^optimizer\.state\[.*\]$", "state"),
    (r"^optimizer\.(?P<n>\w+)$", "{n}"),
    (r"^param_groups\[\d+\]\.(?P<n>\w+)$", "{n}"),
    (r"^parameter \S+ attributes$", "register_hook"),
    (r"^the environment \(os\.environ\)$", "environ"),
    (r"^builtins$", "builtins"),
    (r"^numpy's global random generator$", "seed"),
    (r"^torch namespace [\w.]*?(?P<n>\w+)$", "{n}"),
    (r"^torch\.Tensor's methods$", "Tensor"),
    (r"^torch default dtype$", "set_default_dtype"),
    (r"^torch grad mode$", "set_grad_enabled"),
    (r"^torch CPU generator$", "manual_seed"),
    (r"^torch \S+$", "register_hook"),
)
# a module's training flag ("module <model>.layers.0 training") is set by these calls
_TRAINING = ("train", "eval")
_MAX_BYTES = 2_000_000        # a neighbour file larger than this is not read


def _subject(what: str) -> str:
    """The state's name out of a message of :func:`leftover.scalar_state_differences`."""
    if what.startswith("prove --torch cannot read "):       # "... read X (why), so it ..."
        return what[len("prove --torch cannot read "):].split(", so it cannot tell")[0] \
            .rsplit(" (", 1)[0].strip()
    for lead in ("the parallel step changes ", "the single-device step changes ",
                 "both steps change ", "the step changes "):
        if what.startswith(lead):
            what = what[len(lead):]
            break
    for tail in (" (to ", " leaves the step as ", " is a ", " to a value "):
        what = what.split(tail)[0]
    return what.strip()


def _targets(subject: str) -> tuple[tuple[str, ...], str | None]:
    """(identifiers to look for, the neighbour file that holds the global, if named)."""
    if subject.endswith(" training"):
        return _TRAINING, None
    for pat, out in _PATTERNS:
        m = re.match(pat, subject)
        if m is not None:
            names = tuple(w.split(".")[-1] for w in out.format(**m.groupdict()).split())
            return names, m.groupdict().get("file")
    return (), None


def _name(e: ast.expr) -> str | None:
    """The name an expression ends in, through items and calls: ``x`` of ``x``, ``a.x``,
    ``a.x[0]``, ``a.x(...)``."""
    while isinstance(e, (ast.Subscript, ast.Call)):
        e = e.value if isinstance(e, ast.Subscript) else e.func
    return e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None


def _writes(node: ast.AST, names: tuple[str, ...]) -> Iterator[int]:
    """Lines under ``node`` that write one of ``names`` (the module docstring's forms)."""
    for n in ast.walk(node):
        store = isinstance(getattr(n, "ctx", None), (ast.Store, ast.Del))
        if isinstance(n, ast.Name) and store and n.id in names:
            yield n.lineno
        elif isinstance(n, ast.Attribute) and store and (
                n.attr in names or _name(n.value) in names):
            yield n.lineno
        elif isinstance(n, ast.Subscript) and store and (
                _name(n.value) in names or (isinstance(n.slice, ast.Constant)
                                            and n.slice.value in names)):
            yield n.lineno
        elif isinstance(n, ast.Call):
            f = n.func
            if (_name(f) in names and _name(f) != "type") or (
                    isinstance(f, ast.Attribute) and _name(f.value) in names):
                yield n.lineno
            elif _name(f) in ("setattr", "delattr") and len(n.args) >= 2 \
                    and isinstance(n.args[1], ast.Constant) and n.args[1].value in names:
                yield n.lineno


def _functions(tree: ast.AST) -> Iterator[ast.AST]:
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield n


def _parse(path: str, source: str | None = None) -> ast.Module | None:
    try:
        if source is None:
            p = Path(path)
            if not p.is_file() or p.stat().st_size > _MAX_BYTES:
                return None
            source = p.read_text(encoding="utf-8", errors="replace")
        return ast.parse(source, filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


def _train_step(tree: ast.Module) -> ast.AST | None:
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "train_step":
            return n
    return None


def _train_step_line(tree: ast.Module) -> int:
    """The line that defines or imports ``train_step`` (the last one wins, as in Python)."""
    line = 1
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "train_step":
            line = n.lineno
        elif isinstance(n, ast.ImportFrom) and any(
                (a.asname or a.name) == "train_step" for a in n.names):
            line = n.lineno
        elif isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "train_step" for t in n.targets):
            line = n.lineno
    return line


def state_site(path: str, source: str, what: str) -> str:
    """Where the step changes the state ``what`` names, in words with ``file:line``.

    Args:
        path: the train file as the user gave it (its directory holds the neighbour modules).
        source: the train file's text (the bytes the capture ran).
        what: one message of :func:`leftover.scalar_state_differences`.

    Returns:
        ``"written at train.py:52"`` (the first write of the named state in ``train_step``, or
        failing that in any function of the file, or of the neighbour file a global belongs
        to), else ``"changed during train_step (train.py:44)"``. Never raises.
    """
    names, file = _targets(_subject(what))
    base = os.path.basename(path)
    tree = _parse(path, source or None)
    if tree is None:
        return f"changed during train_step ({base}:1)"
    candidates: list[tuple[str, ast.Module]] = [(base, tree)]
    if file and file != base:
        other = _parse(os.path.join(os.path.dirname(os.path.abspath(path)), file))
        if other is not None:
            candidates.insert(0, (file, other))
    if names:
        for fname, t in candidates:
            step = _train_step(t)
            if step is not None:
                lines = sorted(_writes(step, names))
                if lines:
                    return f"written at {fname}:{lines[0]}"
            lines = sorted(x for f in _functions(t) for x in _writes(f, names))
            if lines:
                return f"written at {fname}:{lines[0]}"
    return f"changed during train_step ({base}:{_train_step_line(tree)})"


def declaration_site(path: str, source: str, name: str) -> str:
    """``train.py:11``: the module-level line that assigns ``name`` (``MESH``), else line 1."""
    tree = _parse(path, source or None)
    line = 1
    for n in tree.body if tree is not None else ():
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            line = n.lineno
            break
    return f"{os.path.basename(path)}:{line}"
