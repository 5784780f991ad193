"""Precision lint: reductions and accumulations narrower than FP32 around collectives.

CASES.md section 9 (B36 NeMo PR #8792, B38 RL-Kernel #313). Over the reals a cast is the
identity (``CAST`` is removed by the normaliser, rule ``cast-elim``), so the proof cannot see
where rounding happens: both the buggy and the fixed plans of B36 / B38 are EQUIVALENT, which is
right. This lint reads the plan's terms *before* normalisation and flags

* **narrow reduction**: a reducing collective (``ALL_REDUCE`` sum, ``REDUCE_SCATTER``; over a
  mesh axis or over ``mb``, the micro-batch accumulation buffer) whose input dtype is narrower
  than the minimum (default ``fp32``). ``all_reduce(x, a, dtype="bf16")`` /
  ``reduce_scatter(..., dtype=...)`` name the communication dtype (a cast before the
  collective), and any ``ops.cast(x, "bf16")`` that reaches a collective through ops that keep
  the dtype is the same finding (B38: cast to bf16 *before* the TP all-reduce);
* **narrowing cast before a reduction**: a cast to a narrow dtype between the value's last local
  accumulation (a contraction) and the reducing collective, even if the value is widened again
  (``cast(cast(P, "bf16"), "fp32")``: the addends are already rounded).

Limits: the lint cannot tell a rounding the spec also does (mixed-precision activations) from a
new one unless a contraction sits between the cast and the collective; casts of data inputs that
reach a collective through elementwise ops only are flagged.

Dtypes (PyTorch's type promotion, simplified): a ``CAST`` has its dtype; spec inputs are
``fp32`` (the spec's precision); scalar leaves (constants, sizes, per-rank constants) are weak
and take the other operand's dtype; every other op has the widest dtype of its operands.
A finding names the collective's site (``file:line``), the tensor (its type), its dtype and the
narrowing cast's site. The lint never changes the proof's verdict (``docs/cli.md``).

Why it matters (numbers from CASES.md, checked in ``tests/bugs/test_precision.py`` with torch):
B36: rank gradients ``1 + 2^-8`` and ``2^-8`` sum to ``1`` in bf16 but ``1 + 2^-7`` in fp32;
B38: ``bf16(1 + 2^-8) + bf16(2^-8) = 1.0`` vs ``bf16(1 + 2^-7) = 1.0078125``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spec_lang.tensor import site_of
from spec_lang.term import ELEMENTWISE, LEAF, Op, Term, walk

__all__ = ["Finding", "lint", "lint_terms", "dtype_width", "MIN_DTYPE", "dtype_of"]

MIN_DTYPE = "fp32"
_WIDTH = {
    "fp64": 64, "float64": 64, "double": 64,
    "fp32": 32, "float32": 32, "float": 32,
    "tf32": 19,
    "bf16": 16, "bfloat16": 16, "fp16": 16, "float16": 16, "half": 16,
    "fp8": 8, "fp8_e4m3": 8, "fp8_e5m2": 8, "float8_e4m3fn": 8, "float8_e5m2": 8,
}
_CANON = {"float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32",
          "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8_e4m3fn": "fp8_e4m3",
          "float8_e5m2": "fp8_e5m2"}
# significand bits (incl. the implicit one): what decides whether an addend survives a sum
_MANTISSA = {"fp64": 53, "fp32": 24, "tf32": 11, "bf16": 8, "fp16": 11, "fp8": 4,
             "fp8_e4m3": 4, "fp8_e5m2": 3}


def _canon(d: str) -> str:
    d = str(d).lower().removeprefix("torch.")
    return _CANON.get(d, d)


def dtype_width(d: str) -> int:
    """Precision rank of dtype ``d``: significand bits (``fp32`` 24, ``bf16`` 8, ``fp16`` 11).

    Raises:
        ValueError: an unknown dtype name.
    """
    c = _canon(d)
    if c not in _MANTISSA:
        raise ValueError(f"unknown dtype {d!r}; known: {sorted(set(_WIDTH))}")
    return _MANTISSA[c]


@dataclass(frozen=True)
class Finding:
    """One lint finding: a reduction at ``site`` runs in ``dtype`` (narrower than ``minimum``)."""

    site: str        # file:line of the collective (or the accumulation)
    collective: str  # "all_reduce over tp", "reduce_scatter over dp along V", "accumulation over mb"
    tensor: str      # the reduced tensor's type, e.g. "(B, S[tp], H)"
    dtype: str
    minimum: str
    cast_site: str   # where the narrowing cast is ("" if the input is narrow for another reason)
    goals: tuple[str, ...]

    def render(self) -> str:
        cast = f"; narrowed by the cast at {self.cast_site}" if self.cast_site else ""
        return (f"{self.site}: precision: {self.collective} reduces {self.tensor} in "
                f"{self.dtype} (narrower than {self.minimum}){cast}; reduce in {self.minimum} "
                f"and cast after the collective (affects {', '.join(self.goals[:3])}"
                f"{' ...' if len(self.goals) > 3 else ''})")

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "collective": self.collective, "tensor": self.tensor,
                "dtype": self.dtype, "minimum": self.minimum, "cast_site": self.cast_site,
                "goals": list(self.goals)}


def dtype_of(roots: Iterable[Term]) -> dict[int, tuple[str | None, Term | None]]:
    """``id(node) -> (dtype, the CAST that set it)`` for every node below ``roots``.

    ``None`` dtype: a weak scalar (constant, size, per-rank constant) that takes its partner's.
    """
    out: dict[int, tuple[str | None, Term | None]] = {}
    for t in walk(list(roots)):  # post-order: arguments first
        if t.op is Op.CAST:
            out[id(t)] = (_canon(t.attrs[0]), t)
        elif t.op is Op.INPUT:
            out[id(t)] = (MIN_DTYPE, None)
        elif t.op in LEAF:
            out[id(t)] = (None, None)
        else:
            best: tuple[str | None, Term | None] = (None, None)
            for a in t.args:
                d = out[id(a)]
                if d[0] is not None and (best[0] is None or
                                         dtype_width(d[0]) > dtype_width(best[0])):
                    best = d
            out[id(t)] = best
    return out


_PASS_THROUGH = ELEMENTWISE | {Op.RENAME, Op.CHUNK, Op.CONCAT, Op.SHARD, Op.PART}


def _narrowing_casts(roots: Iterable[Term], floor: int) -> dict[int, Term]:
    """``id(node) -> a CAST to a dtype narrower than ``floor`` reached from the node through
    elementwise and movement ops only (not through a contraction or a collective): the value
    was rounded after its last local accumulation, even if widened again later."""
    out: dict[int, Term] = {}
    for t in walk(list(roots)):
        if t.op is Op.CAST and dtype_width(t.attrs[0]) < floor:
            out[id(t)] = t
        elif t.op in _PASS_THROUGH:
            for a in t.args:
                c = out.get(id(a))
                if c is not None:
                    out[id(t)] = c
                    break
    return out


def _describe(t: Term) -> str:
    return "(" + ", ".join(str(d) for d in t.dims) + ")"


def lint_terms(named: Sequence[tuple[str, Term]], minimum: str = MIN_DTYPE) -> list[Finding]:
    """Findings for the plan terms ``[(goal name, term)]``, one per reducing collective."""
    floor = dtype_width(minimum)
    roots = [t for _, t in named]
    dt = dtype_of(roots)
    narrowed = _narrowing_casts(roots, floor)
    users: dict[int, list[str]] = {}
    for name, root in named:
        for t in walk([root]):
            users.setdefault(id(t), []).append(name)
    found: list[Finding] = []
    seen: set[int] = set()
    for t in walk(roots):
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.op is Op.ALL_REDUCE and t.attrs[1] == "sum":
            what = ("accumulation over mb (micro-batch gradient buffer)" if t.attrs[0] == "mb"
                    else f"all_reduce over {t.attrs[0]}")
        elif t.op is Op.REDUCE_SCATTER:
            what = f"reduce_scatter over {t.attrs[0]} along {t.attrs[1]}"
        else:
            continue
        d, cast = dt[id(t.args[0])]
        if d is None or dtype_width(d) >= floor:
            cast = narrowed.get(id(t.args[0]))
            if cast is None:
                continue
            d = _canon(cast.attrs[0]) + " (rounded, widened again)"
        site = site_of(t)
        if site.startswith("<unknown>") and cast is not None:
            site = site_of(cast)
        found.append(Finding(site=site, collective=what, tensor=_describe(t.args[0]), dtype=d,
                             minimum=minimum, cast_site=site_of(cast) if cast is not None else "",
                             goals=tuple(dict.fromkeys(users.get(id(t), [])))))
    found.sort(key=lambda f: (f.site, f.collective))
    return found


def lint(problem: Any, minimum: str = MIN_DTYPE) -> list[Finding]:
    """Precision findings for every goal's plan term (``problem.goals[*].actual``)."""
    return lint_terms([(g.name, g.actual) for g in problem.goals], minimum)
