"""Printing a value of the step (``print(f"loss {loss.item():.4f}")``) while the capture runs
the train file (findings R35d-5, R35e-2; hardened after round 41b).

The capture's tensors are fake: ``loss.item()`` is a symbol (``SymFloat``), and formatting it
with a spec (``:.4f``, ``%.4f``) raises, so a right step that prints its loss was refused (exit
3). Giving every formatted symbol a placeholder text is unsound: a step that reads the text
back takes a branch the real run does not (R35e-1: ``s = f"{t.item():.0f}"; n = float(s) if
s.isdigit() else 1.0`` was EQUIVALENT). So only one shape of statement is handled, and the
text it makes goes nowhere:

* **the statement** (:class:`LogCalls`, compiled into the train file by
  :func:`spec_lang.torch_frontend.caught.compile_train_file`): an expression statement inside a
  function whose value is a call ``print(ARGS, KW=...)`` of no ``**`` argument, every argument
  built only from names, attributes, constants, subscripts whose index holds no text,
  f-strings (constant format specs), ``%`` with a string on its left and tuples, and calls of
  a tensor method with no argument (``.item()``, ``.detach()``, ``.mean()``, ...: ``_METHODS``);
  no arithmetic (a symbol's ``x / (x - 2)`` raises nothing in the capture: R41b-4). No text
  reaches any code but ``str``'s own (``_text_free``);
* **the callee, at run time** (:func:`log_call`): ``builtins.print`` as the front end imported
  it, writing to ``sys.__stdout__`` / ``sys.__stderr__`` as they were when the front end was
  imported (the same objects, open, on the same file descriptor and the same open file:
  R41b-6), the text the real print would write encodable in the stream's encoding (R41b-2:
  the real print raises there), ``sep`` / ``end`` strings or None, ``flush`` a bool.
  Anything else (another callee, another stream, ``logging``) runs as written, and a
  formatted symbol raises as before.

Then the arguments are evaluated as the real run evaluates them (the same side effects;
``print``'s ``str()`` of an argument that is not a string, number, tensor or symbol is called
too, so a ``__str__`` of the user's runs as for real), a symbol formatted *in the statement
itself* (a frame check: not in a property or a method it calls) gets a placeholder text
(a symbol's or a fake tensor's ``__format__`` -> ``"<symbolic:SPEC>"``: ``f"{loss}"``,
R41b-5; a symbol's ``__float__`` -> ``nan`` for ``%``; never a number to index or compute
with: R41b-1), and the call is skipped: what it would have written goes to
a stream outside the process (the terminal, a pipe or a file), which the verdict does not
compare (``docs/torch.md``, "The contract"). ``logging`` calls are not handled (round 41b:
handlers, formatters, locks, ``lastResort`` and the level cache all run user-reachable code).
"""

from __future__ import annotations

import ast
import builtins
import io
import math
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["LogCalls", "log_call", "MARK"]

MARK = "\x00shardproof: a print statement\x00"

_PRINT = builtins.print
_PRINT_KW = frozenset({"sep", "end", "flush", "file"})
# tensor methods with no argument an argument may call (not ``inspect.currentframe()``: a
# frame read there would see the rewrite's lambda)
_METHODS = frozenset({"item", "detach", "cpu", "float", "double", "mean", "sum", "norm", "abs",
                      "numel", "dim", "clone"})


def _identity(stream: Any) -> Any:
    """The stream's file descriptor and the open file behind it (device, inode)."""
    try:
        fd = stream.fileno()
        st = os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        return None
    return fd, st.st_dev, st.st_ino


# the standard streams as the process started them (the front end is imported before the train
# file): a stream the file rebinds or redirects is not outside the process (R41b-6)
_STREAMS = tuple((s, _identity(s)) for s in (sys.__stdout__, sys.__stderr__) if s is not None)


def _is_text(n: ast.AST) -> bool:
    """``n`` evaluates to text the statement makes (a constant string is text too)."""
    return (isinstance(n, ast.JoinedStr)
            or (isinstance(n, ast.Constant) and isinstance(n.value, str))
            or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and _is_text(n.left))
            or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and _is_text(n.func.value))
            or (isinstance(n, ast.Subscript) and _is_text(n.value)))


def _text_free(n: ast.AST) -> bool:
    """``n`` is built only from the nodes of the module docstring, and no text it makes is
    handed to code other than ``str``'s own."""
    if isinstance(n, (ast.Constant, ast.Name)):
        return not isinstance(n, ast.Name) or isinstance(n.ctx, ast.Load)
    if isinstance(n, ast.Attribute):
        return _text_free(n.value)
    if isinstance(n, ast.Subscript):      # an index holds no text anywhere (R41b-1: a tuple key)
        return _text_free(n.value) and _text_free(n.slice) and not any(
            _is_text(x) and not isinstance(x, ast.Constant) for x in ast.walk(n.slice))
    if isinstance(n, ast.Starred):
        return _text_free(n.value)
    if isinstance(n, ast.Tuple):
        return all(_text_free(e) for e in n.elts)
    if isinstance(n, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) or _formatted_ok(v) for v in n.values)
    if isinstance(n, ast.BinOp):          # only text % values: no arithmetic (R41b-4)
        return isinstance(n.op, ast.Mod) and _is_text(n.left) and _text_free(n.left) \
            and _text_free(n.right)
    if isinstance(n, ast.Call):
        return (isinstance(n.func, ast.Attribute) and n.func.attr in _METHODS and not n.args
                and not n.keywords and _text_free(n.func.value))
    return False


def _formatted_ok(v: ast.AST) -> bool:
    if not isinstance(v, ast.FormattedValue) or not _text_free(v.value):
        return False
    spec = v.format_spec
    return spec is None or (isinstance(spec, ast.JoinedStr)
                            and all(isinstance(x, ast.Constant) for x in spec.values))


class LogCalls(ast.NodeTransformer):
    """Rewrite each statement of the module docstring's shape, inside a function, to
    ``MARK(lambda: CALLEE, lambda: ((ARGS,), {KW}), line)``; :func:`log_call` replaces
    ``MARK`` (``caught._bound``)."""

    def __init__(self) -> None:
        self.depth = 0                       # inside a function body

    def _function(self, node: ast.AST) -> ast.AST:
        self.depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        saved, self.depth = self.depth, 0    # a class body's names are not a lambda's
        try:
            return self.generic_visit(node)
        finally:
            self.depth = saved

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if not (self.depth and isinstance(call, ast.Call) and _callee_ok(call.func)
                and all(_text_free(a) for a in call.args)
                and all(k.arg is not None and _text_free(k.value) for k in call.keywords)):
            return node
        lam = lambda body: ast.Lambda(ast.arguments([], [], None, [], [], None, []),  # noqa: E731
                                      body)
        args = ast.Tuple([ast.Tuple(list(call.args), ast.Load()),
                          ast.Dict([ast.Constant(k.arg) for k in call.keywords],
                                   [k.value for k in call.keywords])], ast.Load())
        new = ast.Call(ast.Constant(MARK), [lam(call.func), lam(args), ast.Constant(node.lineno)],
                       [])
        return ast.copy_location(ast.Expr(new), node)


def _callee_ok(f: ast.AST) -> bool:
    """Named ``print``: only those statements are rewritten; what the name is decides at run
    time."""
    return isinstance(f, ast.Name) and f.id == "print"


def log_call(callee: Callable[[], Any], arguments: Callable[[], Any], line: int) -> Any:
    """Run one rewritten statement (module docstring): the callee, then its arguments as
    written (a symbol formatted by the statement itself gets a placeholder text), then the
    call, unless it is a print :func:`_skipped` allows. ``line``: the statement's line.

    Raises:
        TypeError: a placeholder was made but the call is not one to skip (the text would
            reach it): what formatting the symbol raises without this module.
        UnicodeEncodeError: the real print's text cannot be encoded for the stream (R41b-2).
    """
    fn = callee()
    made = len(_MADE)
    _ACTIVE.append(arguments.__code__)
    patched = _patch()
    try:
        args, kw = arguments()
    finally:
        _unpatch(patched)
        _ACTIVE.pop()
    if _skipped(fn, args, kw):
        return None
    if len(_MADE) != made:
        raise TypeError(f"line {line}: a symbolic value of the step formatted for a call that "
                        "is not a print to the process's standard output")
    return fn(*args, **kw)


_MADE: list[int] = []         # one entry per placeholder made (growing: a count)
_ACTIVE: list[Any] = []


def _skipped(fn: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    """``fn(*args, **kw)`` is the builtin print whose only effect is text written to a standard
    stream outside the process; what the real print runs on the way is run here: ``str()`` of
    an argument of the user's type (its ``__str__``), and the encoding of the text (which
    raises where the real write raises, R41b-2). False: run the call as written."""
    if fn is not _PRINT or not set(kw) <= _PRINT_KW:
        return False
    stream = kw.get("file")
    stream = sys.stdout if stream is None else stream
    sep, end = kw.get("sep"), kw.get("end")
    if not _outside(stream) or type(sep) not in (str, type(None)) \
            or type(end) not in (str, type(None)) or type(kw.get("flush", False)) is not bool:
        return False
    texts = [a if type(a) is str else str(a) if not _symbolic(a) else "0" for a in args]
    text = (" " if sep is None else sep).join(texts) + ("\n" if end is None else end)
    text.encode(stream.encoding, stream.errors or "strict")
    return True


def _symbolic(a: Any) -> bool:
    """A tensor or a symbol: printed as torch writes it (digits), no code of the user's."""
    import torch  # noqa: PLC0415

    return type(a) in (torch.SymFloat, torch.SymInt, torch.SymBool) or isinstance(a, torch.Tensor)


def _outside(stream: Any) -> bool:
    """One of the process's standard streams as the front end found them: the same object, a
    ``TextIOWrapper`` on a file, open, on the same file descriptor and open file (the
    terminal, a pipe or a file: not this process's state)."""
    for own, ident in _STREAMS:
        if stream is own:
            break
    else:
        return False
    if type(stream) is not io.TextIOWrapper or stream.closed or ident is None:
        return False
    raw = stream.buffer      # a FileIO itself when Python runs unbuffered (-u)
    if type(raw) in (io.BufferedWriter, io.BufferedRandom):
        raw = raw.raw
    return type(raw) is io.FileIO and _identity(stream) == ident


def _placeholder_format(self: Any, spec: str) -> str:
    return "<symbolic:" + spec + ">"        # the spec's own characters (a fill) kept


_PLACEHOLDERS = {"__format__": _placeholder_format,
                 "__float__": lambda self: math.nan}            # noqa: ARG005 -- for %


def _patch() -> list[tuple[type, str, Any]]:
    """Placeholders for torch's symbols, each used only when called from the statement's own
    argument code (the innermost active one); any other caller gets torch's behaviour."""
    import torch  # noqa: PLC0415
    from torch._subclasses.fake_tensor import FakeTensor  # noqa: PLC0415

    done = []
    for cls, names in ((torch.SymFloat, _PLACEHOLDERS), (torch.SymInt, _PLACEHOLDERS),
                       (FakeTensor, ("__format__",)), (torch.Tensor, ("__format__",))):
        for name in names:
            stand_in = _PLACEHOLDERS[name]
            own = cls.__dict__.get(name)
            fallback = getattr(cls, name, None)
            if fallback is None:
                continue

            def method(self: Any, *a: Any, _fb: Any = fallback, _si: Any = stand_in) -> Any:
                if _ACTIVE and sys._getframe(1).f_code is _ACTIVE[-1]:  # noqa: SLF001
                    _MADE.append(1)
                    return _si(self, *a)
                return _fb(self, *a)

            setattr(cls, name, method)
            done.append((cls, name, own))
    return done


def _unpatch(done: list[tuple[type, str, Any]]) -> None:
    for cls, name, own in reversed(done):
        if own is None:
            delattr(cls, name)
        else:
            setattr(cls, name, own)
