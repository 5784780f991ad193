"""``load(path) -> Problem``: import a plan file and trace it.

Convention (``docs/dsl.md``): a plan file is a Python file that defines two module-level
names, ``spec`` (a :class:`~spec_lang.spec.Spec`) and ``plan`` (a :class:`~spec_lang.plan.Plan`).
The file is executed as a fresh module that is *not* left in ``sys.modules`` (it is registered
only while it runs, so dataclasses and pickling inside it work).

Every error is a :class:`SpecError` or :class:`PlanError` on one line per problem, starting with
``file:line:``.
"""

from __future__ import annotations

import hashlib
import sys
import traceback
import types
from pathlib import Path

from spec_lang.errors import PlanError, SpecError, SpecLangError
from spec_lang.problem import Problem
from spec_lang.term import TermError

__all__ = ["load"]


def _line_in(exc: BaseException, path: str) -> int:
    """The deepest traceback line of ``exc`` inside ``path`` (1 when none)."""
    line = 1
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename == path and fr.lineno is not None:
            line = fr.lineno
    return line


def load(path: str | Path, source: bytes | None = None) -> Problem:
    """Load the plan file at ``path`` and return its :class:`Problem`.

    ``source``: the file's bytes when the caller has read them already (the isolated tracer of
    ``proofs/isolation.py`` runs exactly the bytes its parent hashed); ``path`` then only names
    the file in sites and errors.

    Raises:
        SpecError: missing/unreadable file, syntax error, no ``spec``, spec trace errors.
        PlanError: no ``plan``, placement and plan trace errors, any other exception raised
            while running the file (re-raised with the file's line).
    """
    from spec_lang.iteration import build_problem  # the tracer, imported when a plan is loaded
    from spec_lang.plan import Plan
    from spec_lang.spec import Spec

    p = str(path)
    if source is not None:
        src = bytes(source)
    else:
        try:
            src = Path(p).read_bytes()
        except OSError as e:
            raise SpecError(f"{p}:1: cannot read the plan file: {e.strerror or e}") from None
    sha = hashlib.sha256(src).hexdigest()
    try:
        code = compile(src, p, "exec")
    except SyntaxError as e:
        raise SpecError(f"{p}:{e.lineno or 1}: syntax error: {e.msg}") from None
    except (RecursionError, MemoryError) as e:   # too deeply nested for Python's compiler
        raise SpecError(f"{p}:1: the plan file is nested too deeply for Python to compile "
                    f"({type(e).__name__}): split its longest expression") from None
    modname = f"_shardproof_plan_{sha[:16]}"
    mod = types.ModuleType(modname)
    mod.__file__ = p
    sys.modules[modname] = mod
    try:
        try:
            exec(code, mod.__dict__)  # noqa: S102 -- loading the user's plan file is the point
        except SpecLangError:
            raise
        except SystemExit as e:  # a plan file must not decide the verdict by exiting
            raise PlanError(f"{p}:{_line_in(e, p)}: the plan file called sys.exit({e.code!r}) "
                            f"while loading; a plan file only defines `spec` and `plan`") from None
        except Exception as e:  # noqa: BLE001 -- any user error becomes one PlanError line
            raise PlanError(f"{p}:{_line_in(e, p)}: {type(e).__name__}: {e}") from None
        spec = mod.__dict__.get("spec")
        plan = mod.__dict__.get("plan")
        if not isinstance(spec, Spec):
            raise SpecError(f"{p}:1: the plan file must define `spec = Spec(...)` at module level"
                            f"{'' if spec is None else f' (spec is a {type(spec).__name__})'}")
        if not isinstance(plan, Plan):
            raise PlanError(f"{p}:1: the plan file must define `plan = Plan(...)` at module level"
                            f"{'' if plan is None else f' (plan is a {type(plan).__name__})'}")
        try:
            return build_problem(spec, plan, path=p, sha256=sha)
        except SpecLangError:
            raise
        except TermError as e:
            raise PlanError(f"{p}:{_line_in(e, p)}: {e}") from None
        except SystemExit as e:
            raise PlanError(f"{p}:{_line_in(e, p)}: the plan called sys.exit({e.code!r}) while "
                            f"being traced") from None
        except Exception as e:  # noqa: BLE001
            raise PlanError(f"{p}:{_line_in(e, p)}: {type(e).__name__}: {e}") from None
    finally:
        sys.modules.pop(modname, None)
