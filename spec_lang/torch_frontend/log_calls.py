"""Printing and logging a value of the step (``print(f"loss {loss.item():.4f}")``,
``logger.info("loss %.4f", loss.item())``) while the capture runs the train file (findings
R35d-5, R35e-2).

The capture's tensors are fake: ``loss.item()`` is a symbol (``SymFloat``), and formatting it
with a spec (``:.4f``, ``%.4f``) raises, so a right step that logs its loss was refused (exit
3). Giving every formatted symbol a placeholder text is unsound: a step that reads the text
back takes a branch the real run does not (R35e-1: ``s = f"{t.item():.0f}"; n = float(s) if
s.isdigit() else 1.0`` was EQUIVALENT). So only one shape of statement is handled, and the
text it makes goes nowhere:

* **the statement** (:class:`LogCalls`, compiled into the train file by
  :func:`spec_lang.torch_frontend.caught.compile_train_file`): an expression statement inside a
  function whose value is a call ``CALLEE(ARGS, KW=...)``, the callee named ``print`` or a
  logging level (``info``, ``logger.info``, ...), of no ``**`` argument, every
  argument built only from names, attributes, constants, subscripts, f-strings (constant format
  specs), ``%`` with a string on its left, arithmetic on non-text operands and calls of a
  method with no argument (``.item()``, ``.detach()``): no text reaches any code but ``str``'s
  own (``_text_free``);
* **the callee, at run time** (:func:`log_call`): ``builtins.print`` as the front end imported
  it, writing to the process's own ``sys.__stdout__`` / ``sys.__stderr__``; or a method of a
  ``logging.Logger`` (``debug`` ... ``critical``, ``log``, as the standard library defined
  them before the train file ran) or ``logging``'s module functions, with arguments Python or
  torch turn into text (strings, numbers, tensors, symbols: no ``__str__`` of the user's runs
  in a handler) and no ``exc_info``, whose loggers (up the ``propagate`` chain) have no
  filters and only ``StreamHandler``s to those two streams, ``FileHandler``s or
  ``NullHandler``s with the standard ``Formatter``, logging's own code unchanged
  (``_unchanged``). Anything else runs as written (and a formatted symbol raises as
  before).

Then the arguments are evaluated as the real run evaluates them (the same side effects;
``print``'s ``str()`` of an argument that is not a string, number, tensor or symbol is called
too, so a ``__str__`` of the user's runs as for real), a
symbol formatted *in the statement itself* (a frame check: not in a property or a method it
calls) gets a placeholder (``__format__`` -> ``"<symbolic>"``, ``__float__`` -> ``nan``,
``__int__`` / ``__index__`` -> ``0``), and the call is skipped: what it would have written goes
to a stream outside the process (a file or the terminal), which the verdict does not compare
(``docs/torch.md``, "The contract"). Not done: ``logging``'s level cache (``Logger._cache``)
is not filled by a skipped call.
"""

from __future__ import annotations

import ast
import builtins
import io
import logging
import math
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["LogCalls", "log_call", "MARK"]

MARK = "\x00shardproof: a print / logging statement\x00"

_PRINT = builtins.print
_LEVELS = ("debug", "info", "warning", "warn", "error", "critical", "fatal", "log")
_LOGGER_METHODS = frozenset(getattr(logging.Logger, k) for k in _LEVELS)
_MODULE_FUNCS = frozenset(getattr(logging, k) for k in _LEVELS)
_HANDLERS = (logging.StreamHandler, logging.FileHandler, logging.NullHandler)
_PRINT_KW = frozenset({"sep", "end", "flush", "file"})
_LOG_KW = frozenset({"stacklevel"})
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)


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
    if isinstance(n, ast.Subscript):
        return _text_free(n.value) and _text_free(n.slice) and not _is_text(n.slice)
    if isinstance(n, ast.Starred):
        return _text_free(n.value)
    if isinstance(n, (ast.Tuple, ast.List)):
        return all(_text_free(e) for e in n.elts)
    if isinstance(n, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) or _formatted_ok(v) for v in n.values)
    if isinstance(n, ast.BinOp):
        if isinstance(n.op, ast.Mod) and _is_text(n.left):
            return _text_free(n.left) and _text_free(n.right)
        return (isinstance(n.op, _ARITH) and not _is_text(n.left) and not _is_text(n.right)
                and _text_free(n.left) and _text_free(n.right))
    if isinstance(n, ast.UnaryOp):
        return isinstance(n.op, (ast.USub, ast.UAdd)) and not _is_text(n.operand) \
            and _text_free(n.operand)
    if isinstance(n, ast.Call):
        return (isinstance(n.func, ast.Attribute) and not n.args and not n.keywords
                and _text_free(n.func.value))
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
    """Named as a print or a logging call (``print``, ``info``, ``logger.info``, ...): only
    those statements are rewritten; what the name is decides at run time."""
    if isinstance(f, ast.Name):
        return f.id == "print" or f.id in _LEVELS
    return isinstance(f, ast.Attribute) and f.attr in _LEVELS and _text_free(f.value)


def log_call(callee: Callable[[], Any], arguments: Callable[[], Any], line: int) -> Any:
    """Run one rewritten statement (module docstring): the callee, then its arguments as
    written (a symbol formatted by the statement itself gets a placeholder), then the call,
    unless it is a print / logging call :func:`_skipped` allows. ``line``: the statement's line.

    Raises:
        TypeError: a placeholder was made but the call is not one to skip (the text would
            reach the call): what formatting the symbol raises without this module.
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
                        "is not a print to the terminal or a standard logging call")
    return fn(*args, **kw)


_MADE: list[int] = []         # one entry per placeholder made (growing: a count)
_ACTIVE: list[Any] = []


def _skipped(fn: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    """``fn(*args, **kw)`` is a print or logging call whose only effect is text written outside
    the process; the user code the real call would run on the way (``__str__`` of an argument
    for ``print``) is run here. False: run the call as written."""
    if fn is _PRINT:
        if not set(kw) <= _PRINT_KW or not _outside(kw.get("file", sys.stdout)) \
                or any(type(kw.get(k)) not in (str, type(None)) for k in ("sep", "end")) \
                or type(kw.get("flush", False)) is not bool:
            return False
        for a in args:                     # print calls str() of each: a user __str__ runs
            if not _plain_value(a):
                str(a)
        return True
    if set(kw) - _LOG_KW or any(type(v) is not int for v in kw.values()) \
            or not all(_plain_value(a) for a in args):
        return False                       # logging would run a user __str__ / __float__
    owner = getattr(fn, "__self__", None)
    if getattr(fn, "__func__", None) in _LOGGER_METHODS and isinstance(owner, logging.Logger):
        return _plain(owner)
    if fn in _MODULE_FUNCS:         # logging.info(...): basicConfig() first when root has none
        return bool(logging.root.handlers) and _plain(logging.root)
    return False


def _plain_value(a: Any) -> bool:
    """Turned into text by torch's or Python's own code only."""
    import torch  # noqa: PLC0415

    return type(a) in (str, int, float, bool, type(None), torch.SymFloat, torch.SymInt,
                       torch.SymBool) or isinstance(a, torch.Tensor)


def _outside(stream: Any) -> bool:
    """The process's own standard streams on a file descriptor (the terminal, a pipe or a
    file: not this process's state)."""
    if stream is None or not (stream is sys.__stdout__ or stream is sys.__stderr__) \
            or type(stream) is not io.TextIOWrapper:
        return False
    raw = stream.buffer      # a FileIO itself when Python runs unbuffered (-u)
    if type(raw) in (io.BufferedWriter, io.BufferedRandom):
        raw = raw.raw
    return type(raw) is io.FileIO


# what a logging call runs on its way to a handler's stream, as the standard library defined
# it before the train file ran (a replaced one runs the user's code: the call is not skipped)
_INTERNALS = {(c, k): c.__dict__[k] for c, names in (
    (logging.Logger, ("_log", "handle", "callHandlers", "makeRecord", "isEnabledFor",
                      "findCaller", "getEffectiveLevel", *_LEVELS)),
    (logging.Filterer, ("filter",)),
    (logging.Handler, ("handle", "format", "acquire", "release", "handleError")),
    (logging.StreamHandler, ("emit", "flush")), (logging.FileHandler, ("emit", "_open")),
    (logging.NullHandler, ("handle", "emit")),
    (logging.Formatter, ("format", "formatMessage", "formatTime", "usesTime")),
    (logging.LogRecord, ("__init__", "getMessage"))) for k in names}
_RECORD_FACTORY = logging.getLogRecordFactory()


def _unchanged(*objs: Any) -> bool:
    """logging's own code in place, and no instance attribute of ``objs`` shadowing it."""
    if logging.getLogRecordFactory() is not _RECORD_FACTORY:
        return False
    if any(c.__dict__.get(k) is not f for (c, k), f in _INTERNALS.items()):
        return False
    names = {k for _, k in _INTERNALS}
    return not any(names & set(getattr(o, "__dict__", {})) for o in objs)


def _plain(logger: logging.Logger) -> bool:
    seen = False
    c: Any = logger
    while c is not None:
        if c.filters or type(c) not in (logging.Logger, logging.RootLogger) \
                or not _unchanged(c, *c.handlers, *(h.formatter for h in c.handlers)):
            return False
        for h in c.handlers:
            seen = True
            if type(h) not in _HANDLERS or h.filters or \
                    type(h.formatter) not in (type(None), logging.Formatter):
                return False
            if type(h) is logging.StreamHandler and not _outside(h.stream):
                return False
        if not c.propagate:
            break
        c = c.parent
    return seen or _outside(sys.stderr)      # no handler: logging.lastResort, to sys.stderr


_PLACEHOLDERS = {"__format__": lambda self, spec: "<symbolic>",   # noqa: ARG005
                 "__float__": lambda self: math.nan,            # noqa: ARG005
                 "__int__": lambda self: 0, "__index__": lambda self: 0}   # noqa: ARG005


def _patch() -> list[tuple[type, str, Any]]:
    """Placeholders for torch's symbols, each used only when called from the statement's own
    argument code (the innermost active one); any other caller gets torch's behaviour."""
    import torch  # noqa: PLC0415

    done = []
    for cls in (torch.SymFloat, torch.SymInt):
        for name, stand_in in _PLACEHOLDERS.items():
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
