"""The user-facing traced tensor and the trace context.

A :class:`Tensor` is a :class:`~spec_lang.term.Term` (what the value *is*) plus where the user
made it (``file:line``) and an optional name for error messages. Calling ops on tensors builds
terms; nothing is computed.

The *trace context* (:func:`tracing`) says whether a spec or a plan is being traced (so that
errors are :class:`SpecError` or :class:`PlanError`), collects the sizes of every
:class:`~spec_lang.dims.Dim` seen, and holds the plan's mesh.

Sites: :func:`user_site` is the first stack frame outside the core ``spec_lang`` modules (the
files directly in ``spec_lang/``). Frames in ``spec_lang/models/`` and ``spec_lang/plans/``
count as user frames, so an error inside a library block names the block's line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from spec_lang.dims import Dim
from spec_lang.errors import PlanError, SpecError, SpecLangError
from spec_lang.term import Term

__all__ = ["Tensor", "TraceContext", "tracing", "current_trace", "user_site", "site_of",
           "record_site", "fail"]

_CORE_DIR = os.path.dirname(os.path.abspath(__file__))
# the plan library's frames are not the user's either: a lambda the user hands it is (R54a-6)
_LIBRARY_DIRS = (_CORE_DIR, os.path.join(_CORE_DIR, "plans"))
_PROVER_DIR = os.path.join(os.path.dirname(_CORE_DIR), "proofs") + os.sep


@functools.lru_cache(maxsize=4096)
def _is_user_file(fn: str) -> bool:
    """Whether frames of code file ``fn`` are the user's (not a core ``spec_lang`` module nor
    the plan library ``spec_lang/plans``, not importlib, not generated code such as "<string>"
    dataclass ``__init__`` or "<frozen ...>").
    Cached per file name (``os.path.abspath`` of a relative name is read once, at the working
    directory of its first frame; a site only names a line, it never decides a verdict)."""
    return os.path.dirname(os.path.abspath(fn)) not in _LIBRARY_DIRS \
        and "importlib" not in fn and not fn.startswith("<")


@functools.lru_cache(maxsize=4096)
def _frame_kind(fn: str) -> int:
    """What frames of code file ``fn`` are, for :func:`user_site`: 3 the user's, under the
    prover's own ``proofs/``; 2 the user's; 1 the plan library's; 0 anything else (cached per
    file name, as :func:`_is_user_file`: a trace asks once per op, thousands of times per
    file)."""
    if _is_user_file(fn):
        return 3 if os.path.abspath(fn).startswith(_PROVER_DIR) else 2
    return 1 if os.path.dirname(os.path.abspath(fn)) == _LIBRARY_DIRS[1] else 0


def user_site(depth: int = 1) -> str:
    """``file:line`` of the first frame outside the core ``spec_lang`` modules and the plan
    library; when the first such frame is the prover's own (``proofs/``: the tracing child
    running a library plan's code, no user frame in between), the plan library's first frame
    (R54b-5)."""
    f = sys._getframe(depth)  # noqa: SLF001 -- the documented way to find the user's line
    library = ""
    while f is not None:
        fn = f.f_code.co_filename
        kind = _frame_kind(fn)
        if kind >= 2:
            if library and kind == 3:
                return library
            return f"{fn}:{f.f_lineno}"
        if kind == 1 and not library:
            library = f"{fn}:{f.f_lineno}"
        f = f.f_back
    return library or "<unknown>:0"


def record_site(t: Term, site: str, *, first: bool = True) -> None:
    """Remember where ``t`` was first built (terms are shared, so the first site wins); with
    ``first=False`` the site replaces any earlier one (``proofs/problem_data.py``: the sites a
    traced document names for its own terms). Kept on the term (a slot), not in a table."""
    if not first or t._site is None:  # noqa: SLF001 -- the site slot is this module's
        t._site = site  # noqa: SLF001


def site_of(t: Term) -> str:
    """Where ``t`` was first built by the user, or ``"<unknown>:0"``."""
    site = t._site  # noqa: SLF001
    return "<unknown>:0" if site is None else site


@dataclass
class TraceContext:
    """State of one trace.

    Attributes:
        kind: ``"spec"`` or ``"plan"``.
        sizes: dim name -> size, from every :class:`Dim` seen (and derived dims).
        mesh: axis name -> size (plans; ``"mb"`` included when micro-batching).
        boundaries: ``(name, term, site)`` of every :func:`spec_lang.ops.layer_boundary` mark, in
            trace order (the prover cuts obligations where spec and plan both mark a name).
        adjoints: ``(name, boundary term, its adjoint)`` recorded by ``autodiff.grad`` for every
            marked boundary on a differentiated path (backward cut points).
    """

    kind: str = "spec"
    sizes: dict[str, int] = field(default_factory=dict)
    mesh: dict[str, int] = field(default_factory=dict)
    boundaries: list[tuple[str, Term, str]] = field(default_factory=list)
    adjoints: list[tuple[str, Term, Term]] = field(default_factory=list)

    @property
    def error(self) -> type[SpecLangError]:
        return PlanError if self.kind == "plan" else SpecError

    def record_dim(self, d: Dim, site: str | None = None) -> None:
        old = self.sizes.setdefault(d.name, d.size)
        if old != d.size:
            raise self.error(f"{site or user_site(2)}: dim {d.name} is used with size {d.size} "
                             f"here but with size {old} elsewhere; use one Dim object per name")

    def record_size(self, name: str, size: int) -> None:
        self.record_dim(Dim(name, size))


_STACK: list[TraceContext] = []


def current_trace() -> TraceContext | None:
    return _STACK[-1] if _STACK else None


@contextlib.contextmanager
def tracing(ctx: TraceContext) -> Iterator[TraceContext]:
    """Run a trace with ``ctx`` as the current context."""
    _STACK.append(ctx)
    try:
        yield ctx
    finally:
        _STACK.pop()


def fail(msg: str, *, site: str | None = None) -> SpecLangError:
    """An error of the current trace's kind, ``site: msg`` (``raise fail(...)``)."""
    tr = current_trace()
    cls = tr.error if tr is not None else SpecError
    return cls(f"{site or user_site(2)}: {msg}")


class Tensor:
    """A traced tensor: a term, the user's ``file:line`` and an optional name.

    ``x.dims`` are the dim names in storage order (storage order carries no meaning: dims are
    matched by name). Python operators build terms: ``+ - * /``, unary ``-``, ``**`` with an
    exact exponent. Using a tensor as a Python bool is an error (the trace would fork).
    """

    __slots__ = ("term", "site", "name")
    __array_priority__ = 1000  # keep numpy scalars from swallowing the operator

    def __init__(self, term: Term, site: str | None = None, name: str | None = None):
        self.term = term
        self.site = site or user_site(2)
        self.name = name
        record_site(term, self.site)

    # -- description -----------------------------------------------------------------------------
    @property
    def dims(self) -> tuple[str, ...]:
        return self.term.dim_names

    def placement_str(self) -> str:
        """Dims with their shards, e.g. ``(B[dp], S, F[tp])``."""
        return "(" + ", ".join(str(d) for d in self.term.dims) + ")"

    def describe(self) -> str:
        nm = f"{self.name} " if self.name else ""
        return f"{nm}{self.placement_str()}"

    def named(self, name: str) -> Tensor:
        """The same tensor with a name for error messages."""
        return Tensor(self.term, self.site, name)

    def __repr__(self) -> str:
        return f"Tensor({self.describe()} @ {self.site}: {self.term.op.name})"

    def __bool__(self) -> bool:
        raise fail(f"tensor {self.describe()} used as a Python bool; traced values have no "
                   "truth value (use where(...) or move the test out of the trace)")

    # -- operators ---------------------------------------------------------------------------------
    def __add__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.add(self, o)

    def __radd__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.add(o, self)

    def __sub__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.sub(self, o)

    def __rsub__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.sub(o, self)

    def __mul__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.mul(self, o)

    def __rmul__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.mul(o, self)

    def __truediv__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.div(self, o)

    def __rtruediv__(self, o: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.div(o, self)

    def __neg__(self) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.neg(self)

    def __pow__(self, e: object) -> Tensor:
        from spec_lang import ops  # noqa: PLC0415

        return ops.pow(self, e)


TensorMap = Mapping[str, Tensor]
