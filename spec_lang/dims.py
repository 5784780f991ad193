"""Named dims: ``Dim("H", 4096)``.

A term stores dim *names* only; the size lives in the :class:`Dim` object the user writes and
is collected into the :class:`~spec_lang.term.Binding` when a spec or plan is traced. Two
``Dim`` objects with the same name must agree on the size (checked when they meet in a trace).

*dim* always means a tensor dimension; a mesh axis is an *axis* (STYLE rule 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spec_lang.errors import SpecError

__all__ = ["Dim", "DimLike", "dim_name"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Dim:
    """A named tensor dimension and its real size.

    Args:
        name: identifier (``"B"``, ``"S"``, ``"H"``, ``"KVH"``); not a mesh axis name.
        size: positive integer.

    Raises:
        SpecError: bad name or size.
    """

    name: str
    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name) or self.name == "mb":
            raise SpecError(f"dim name {self.name!r}: use an identifier such as 'H' (not 'mb')")
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size <= 0:
            raise SpecError(f"dim {self.name}: size must be a positive integer, got {self.size!r}")

    def half(self, name: str | None = None) -> Dim:
        """The dim of one half of this one (``HD -> HD_half`` of size ``HD/2``), as RoPE uses.

        Raises:
            SpecError: the size is odd.
        """
        if self.size % 2:
            raise SpecError(f"dim {self.name} (size {self.size}) is odd: it has no half")
        return Dim(name or f"{self.name}_half", self.size // 2)

    def __str__(self) -> str:
        return self.name


DimLike = Dim | str
"""Ops accept a :class:`Dim` or a dim name; a ``Dim`` also records its size in the trace."""


def dim_name(d: DimLike) -> str:
    """The name of ``d``; records its size in the current trace if ``d`` is a :class:`Dim`."""
    if isinstance(d, Dim):
        from spec_lang.tensor import current_trace  # noqa: PLC0415 -- cycle: tensor uses dims

        tr = current_trace()
        if tr is not None:
            tr.record_dim(d)
        return d.name
    if isinstance(d, str):
        return d
    raise SpecError(f"expected a Dim or a dim name, got {d!r}")
