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

* every ``except`` clause (``try`` / ``except*``) first calls ``__shardproof_caught__(line)``,
  which records the exception being handled (``sys.exc_info()``);
* every ``with`` / ``async with`` body is wrapped in ``try: ... except BaseException:
  __shardproof_caught__(line); raise``: the exception goes on to the context manager
  unchanged (a bare ``raise`` adds no traceback entry); one that the manager suppresses
  (``contextlib.suppress``) was recorded on its way.

A recorded exception refuses the train file when the capture ends (:func:`check`), exit 3
with its line, unless it is one the fake world raises exactly as the real run does:
``StopIteration`` / ``StopAsyncIteration`` / ``GeneratorExit`` (iteration), ``ImportError``
(an optional import), ``KeyError`` / ``IndexError`` (a lookup in the train file's own
containers; shapes are concrete in the capture). A train file that replaces
``__shardproof_caught__`` is refused (:func:`check`). Not reached: a ``try`` in a module of
yours that the train file imports (only the train file is compiled here), and a train file
that keeps a reference to the recorder's list to empty it (the R29-4 family: a file that
tampers with the capture).
"""

from __future__ import annotations

import ast
import sys
from typing import Any

__all__ = ["RECORDER", "ALLOWED", "compile_train_file", "check", "found"]

RECORDER = "__shardproof_caught__"
ALLOWED = (StopIteration, StopAsyncIteration, GeneratorExit, ImportError, KeyError, IndexError)
_FOUND: list[tuple[int, str]] = []        # (line, "TypeError: message") in the order caught
_HINT = ("the train file catches {what} at line {line} while the capture runs it: the capture's "
         "tensors are fake (shapes, no values) and its process group is fake, so a step that "
         "catches an error may take a branch the real run does not (R35d-2, round 38); write "
         "the step without the try/except (or catch only KeyError / IndexError / ImportError)")


def _allowed(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):      # except*: the group of the matching ones
        return all(_allowed(e) for e in exc.exceptions)
    return isinstance(exc, ALLOWED)


def _record(line: int) -> None:
    exc = sys.exc_info()[1]
    if exc is None or _allowed(exc):
        return
    text = str(exc).strip().splitlines()
    _FOUND.append((int(line), f"{type(exc).__name__}" + (f" ({text[0][:120]})" if text
                                                         else "")))


def found() -> list[tuple[int, str]]:
    """The exceptions recorded so far, ``(line, "Type (message)")``, oldest first."""
    return list(_FOUND)


class _Instrument(ast.NodeTransformer):
    def _call(self, line: int, at: ast.AST) -> ast.stmt:
        call = ast.Expr(ast.Call(ast.Name(RECORDER, ast.Load()), [ast.Constant(line)], []))
        return ast.copy_location(call, at)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, self._call(node.lineno, node))
        return node

    def _with(self, node: Any) -> ast.AST:
        self.generic_visit(node)
        first = node.body[0]
        handler = ast.ExceptHandler(ast.Name("BaseException", ast.Load()), None,
                                    [self._call(node.lineno, first), ast.Raise(None, None)])
        guard = ast.Try(node.body, [ast.copy_location(handler, first)], [], [])
        node.body = [ast.copy_location(guard, first)]
        return node

    visit_With = _with
    visit_AsyncWith = _with


def compile_train_file(raw: bytes, path: str) -> Any:
    """The train file's code object, instrumented (module docstring); its line numbers are the
    file's.

    Raises:
        SyntaxError: as ``compile`` does.
    """
    tree = _Instrument().visit(ast.parse(raw, path))
    return compile(ast.fix_missing_locations(tree), path, "exec")


def recorder() -> Any:
    """The function the instrumented code calls (bound as ``__shardproof_caught__`` in the
    train file's globals by :func:`contract.read_train_file`)."""
    return _record


def check(path: str, namespace: dict[str, Any] | None, when: str) -> None:
    """Refuse the train file if its code caught an exception so far, or replaced the recorder.

    Raises:
        PlanError: ``"<path>:<line>: the train file catches <Type (message)> ..."`` (exit 3).
    """
    from spec_lang.errors import PlanError

    if namespace is not None and namespace.get(RECORDER) is not _record:
        raise PlanError(f"{path}:1: the train file replaced {RECORDER} ({when}): shardproof's "
                        "record of the exceptions it catches")
    if _FOUND:
        line, what = _FOUND[0]
        raise PlanError(f"{path}:{line}: " + _HINT.format(what=what, line=line) + f" ({when})")
