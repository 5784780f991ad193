"""An exception the train file's own code catches while the capture runs it (adversarial rounds
35a, 35d, 37b, 38a: R35a-3, R35d-2, R37b-2, R38a-1, R38a-2).

The capture runs the train file on fake tensors in a fake process group. Many things raise
there and not in the real run: a value read (``t.data_ptr()``, ``t.numpy()``, ``bytes(t.
untyped_storage())``, ``torch.save(t, buf)``, ``t.share_memory_()``, ``copy.deepcopy(t)``),
reached by any route (``torch._C.TensorBase.data_ptr(g)``, a method bound at import, a lambda
compiled under another file name, torch's ``TypedStorage``). A step that catches the error takes
its fallback in the capture only: r35d_03 and its kin set ``lr = 0.1`` where the real run set
0.2, and were proved EQUIVALENT. :mod:`value_reads` names the reads it knows; this module
closes the family for the train file's own ``try`` statements, whatever raised.

:func:`compile_train_file` compiles the train file with two additions that leave what it
computes unchanged:

* every ``except`` clause (``try`` / ``except*``) first calls the recorder with its line,
  which records the exception being handled (``sys.exc_info()``); the recorder is a constant
  of the compiled code, not a name the file could shadow or rebind (R38c-3);
* every ``with`` / ``async with`` body, every function body, and the parts of a ``try`` that
  has a ``finally`` are wrapped in ``try: ... except BaseException: <recorder>(line);
  raise``: the exception goes on unchanged (a bare ``raise`` adds no traceback entry); one
  that a context manager suppresses (``contextlib.suppress``), a ``finally`` swallows (``return`` /
  ``break`` / ``continue`` in it) or a caller outside the train file catches (torch,
  ``contextlib.suppress`` as a decorator, ``hasattr`` on a property) was recorded on its way.

A recorded exception refuses the train file when the capture ends (:func:`check`), exit 3
with its line, unless it is one the fake world raises exactly as the real run does:
``StopIteration`` / ``StopAsyncIteration`` / ``GeneratorExit`` (iteration), ``ImportError``
(an optional import), ``KeyError`` / ``IndexError`` (a lookup in the train file's own
containers; shapes are concrete in the capture). An ``AttributeError`` is not let through,
even ``nn.Module.__getattr__``'s (r38d_09: ``getattr(m, "scale_" + type(g).__name__.lower())``
misses in the capture only); ``getattr(m, "module", m)`` and ``hasattr`` catch it in C, past
no frame of the train file, and are not recorded (R38c-5). An exception that ends the capture
is recorded too, which changes nothing (the capture fails either way). A ``lambda``'s body and
a generator expression's element and conditions are called through a guard that records what
they raise (R38d-1, R38e-1), unless they read their own frame (``locals()``, ``super()``:
R38e-2, R38e-3) or are generators. Not reached: such a lambda, code the train file compiles
itself (``exec`` / ``eval`` of a string), an error raised and swallowed with no frame of the
train file on the way (R38e-5: a builtin as an ``ExitStack`` callback), a ``try`` in a module
of yours that the train file imports (only the train file is compiled here), and a train
file that rewrites its own code objects or empties the recorder's list (the R29-4 family: a
file that tampers with the capture).
"""

from __future__ import annotations

import ast
import sys
import types
import warnings
from typing import Any

__all__ = ["ALLOWED", "compile_train_file", "check", "found"]

# the call target the instrumented code is compiled with, then replaced in every code object's
# constants by the recorder itself: no name the train file could shadow or rebind (R38c-3)
_MARK = "\x00shardproof: the recorder of caught exceptions\x00"
_GUARD = "\x00shardproof: a lambda's body, guarded\x00"
_BASE = "\x00shardproof: BaseException\x00"    # the guards' except type, not a global name
ALLOWED = (StopIteration, StopAsyncIteration, GeneratorExit, ImportError, KeyError, IndexError)
_FOUND: list[tuple[int, str]] = []        # (line, "TypeError (message)") caught by an except
_MET: list[tuple[int, str]] = []          # (line, ...) met by a with, a function, a finally
_HINT = ("the train file catches {what} at line {line} while the capture runs it: the capture's "
         "tensors are fake (shapes, no values) and its process group is fake, so a step that "
         "catches an error may take a branch the real run does not (R35d-2, round 38); write "
         "the step without the try/except (or catch only KeyError / IndexError / ImportError; "
         "for an attribute that may be missing, getattr(obj, name, default))")


def _allowed(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):      # except*: the group of the matching ones
        return all(_allowed(e) for e in exc.exceptions)
    # torch's non-reentrant activation checkpointing stops a recomputation with its own
    # exception, through the train file's forward, in both runs alike (R38e-6)
    t = type(exc)
    return isinstance(exc, ALLOWED) or (t.__module__ == "torch.utils.checkpoint"
                                        and t.__name__ == "_StopRecomputationError")


_MET_HINT = ("{what} was raised through line {line} of the train file and did not end the "
             "capture: something swallowed it (a context manager, a finally that returns, a "
             "caller of the train file's function). The capture's tensors are fake and its "
             "process group is fake, so the real run may not raise there and take another "
             "branch (R35d-2, round 38); write the step so that nothing it raises is swallowed")


def _record(line: int, through: int = 0) -> None:
    exc = sys.exc_info()[1]
    if exc is None or _allowed(exc):
        return
    text = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}" + (f" ({text[0][:120]})" if text else "")
    (_MET if through else _FOUND).append((int(line), what))


def found() -> list[tuple[int, str]]:
    """The exceptions recorded so far, ``(line, "Type (message)")``: those an except clause
    caught, then those a with body, a function body or a try with a finally met, oldest
    first in each."""
    return list(_FOUND) + list(_MET)


class _Instrument(ast.NodeTransformer):
    def _call(self, line: int, at: ast.AST, through: int = 0) -> ast.stmt:
        args = [ast.Constant(line)] + ([ast.Constant(1)] if through else [])
        call = ast.Expr(ast.Call(ast.Constant(_MARK), args, []))
        return ast.copy_location(call, at)

    def _guarded(self, body: list[ast.stmt], line: int) -> list[ast.stmt]:
        """``body`` in ``try: ... except BaseException: record(line); raise`` (the exception
        goes on unchanged: a bare ``raise`` adds no traceback entry)."""
        if not body:
            return body
        first = body[0]
        handler = ast.ExceptHandler(ast.Constant(_BASE), None,
                                    [self._call(line, first, 1), ast.Raise(None, None)])
        guard = ast.Try(body, [ast.copy_location(handler, first)], [], [])
        return [ast.copy_location(guard, first)]

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, self._call(node.lineno, node))
        return node

    def _with(self, node: Any) -> ast.AST:
        # a manager that suppresses (contextlib.suppress) swallows what its body raised
        self.generic_visit(node)
        node.body = self._guarded(node.body, node.lineno)
        return node

    visit_With = _with
    visit_AsyncWith = _with

    def _try(self, node: Any) -> ast.AST:
        # a ``finally`` that returns, breaks or continues swallows the exception in flight
        self.generic_visit(node)
        if node.finalbody:
            node.body = self._guarded(node.body, node.lineno)
            node.orelse = self._guarded(node.orelse, node.lineno)
            for h in node.handlers:
                h.body = self._guarded(h.body, h.lineno)
        return node

    visit_Try = _try
    visit_TryStar = _try

    def _function(self, node: Any) -> ast.AST:
        # an exception leaving a function of the train file, whoever catches it (torch,
        # ``contextlib.suppress`` as a decorator, ``hasattr`` on a property of the file's)
        self.generic_visit(node)
        doc = node.body[:1] if ast.get_docstring(node, clean=False) is not None else []
        node.body = doc + self._guarded(node.body[len(doc):], node.lineno)
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def _guard_expr(self, e: ast.expr, line: int) -> ast.expr:
        if any(isinstance(x, ast.Name) and x.id in _FRAME_NAMES for x in _own(e)):
            return e
        empty = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                              kw_defaults=[], kwarg=None, defaults=[])
        inner = ast.copy_location(ast.Lambda(empty, e), e)
        return ast.copy_location(
            ast.Call(ast.Constant(_GUARD), [inner, ast.Constant(line)], []), e)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:
        # a generator expression runs lazily, where its consumer is (``ExitStack``, a
        # ``suppress`` outside the file: R38e-1): its element and conditions are guarded
        self.generic_visit(node)
        node.elt = self._guard_expr(node.elt, node.lineno)
        for g in node.generators:
            g.ifs = [self._guard_expr(c, node.lineno) for c in g.ifs]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        # ``lambda a: e`` -> ``lambda a: <guard>(lambda: e, line)``: what ``e`` raises is
        # recorded on its way out, whoever swallows it (R38d-1: ``sorted(key=)``, a callback
        # of ``ExitStack`` / ``weakref.finalize``, a logging formatter)
        self.generic_visit(node)
        # a generator lambda, or one reading its own frame (``locals()``, ``super()``,
        # ``__class__``: R38e-2, R38e-3), is left as written: the guard's inner lambda would
        # change what it computes. Nested scopes are their own (R38e-4: a dead inner
        # generator lambda does not unguard this one)
        if any(isinstance(x, (ast.Yield, ast.YieldFrom, ast.Await)) or (
                isinstance(x, ast.Name) and x.id in _FRAME_NAMES) for x in _own(node.body)):
            return node
        node.body = self._guard_expr(node.body, node.lineno)
        return node


def compile_train_file(raw: bytes, path: str) -> Any:
    """The train file's code object, instrumented (module docstring); its line numbers are the
    file's.

    Raises:
        SyntaxError: as ``compile`` does.
    """
    tree = _Instrument().visit(ast.parse(raw, path))
    with warnings.catch_warnings():      # "'str' object is not callable": replaced below
        warnings.simplefilter("ignore", SyntaxWarning)
        code = compile(ast.fix_missing_locations(tree), path, "exec")
    return _bound(code)


_FRAME_NAMES = frozenset({"locals", "vars", "super", "__class__", "dir", "eval", "exec",
                          "sys", "inspect"})


def _own(node: ast.AST) -> list[ast.AST]:
    """The nodes of ``node``'s own scope (not those of a nested lambda, function, class or
    comprehension)."""
    out, todo = [], [node]
    while todo:
        x = todo.pop()
        out.append(x)
        if x is not node and isinstance(x, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef,
                                            ast.ClassDef, ast.GeneratorExp, ast.ListComp,
                                            ast.SetComp, ast.DictComp)):
            continue
        todo.extend(ast.iter_child_nodes(x))
    return out


def _guarded_call(body: Any, line: int) -> Any:
    """A lambda's body, its exception recorded on the way out (``_Instrument.visit_Lambda``)."""
    try:
        return body()
    except BaseException:
        _record(line, 1)
        raise


def _bound(code: types.CodeType) -> types.CodeType:
    """``code`` with every constant ``_MARK`` (in it and the code objects it holds) replaced
    by the recorder: the instrumented calls load it as a constant, not by name."""
    consts = tuple(_record if type(c) is str and c == _MARK else
                   _guarded_call if type(c) is str and c == _GUARD else
                   BaseException if type(c) is str and c == _BASE else
                   _bound(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_consts=consts)


def check(path: str, when: str) -> None:
    """Refuse the train file if its code caught or swallowed an exception so far.

    Raises:
        PlanError: ``"<path>:<line>: the train file catches <Type (message)> ..."`` (exit 3).
    """
    from spec_lang.errors import PlanError

    if _FOUND:
        line, what = _FOUND[0]
        raise PlanError(f"{path}:{line}: " + _HINT.format(what=what, line=line) + f" ({when})")
    if _MET:
        line, what = _MET[0]
        raise PlanError(f"{path}:{line}: " + _MET_HINT.format(what=what, line=line)
                        + f" ({when})")
