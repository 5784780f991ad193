"""The device mesh of a plan: named axes and their sizes, ``Mesh(dp=4, tp=8)``.

Axis names come from :class:`spec_lang.term.Axis` (``dp tp pp cp sp ep``); ``mb`` (the
micro-batch loop) is not a device axis and is added by :func:`spec_lang.plan.microbatches`.
The order of the keyword arguments is the *mesh order*: a dim sharded over several axes is
split by the first axis first (outermost), as DTensor does.
"""

from __future__ import annotations

from collections.abc import Iterator

from spec_lang.errors import PlanError
from spec_lang.tensor import user_site
from spec_lang.term import Axis

__all__ = ["Mesh"]


class Mesh:
    """A named device mesh.

    Args:
        **axes: axis name -> size, in mesh order (``Mesh(dp=2, tp=4)``).

    Raises:
        PlanError: an unknown axis name, ``mb``, or a size that is not a positive integer.
    """

    def __init__(self, **axes: int):
        self.site = user_site(2)
        valid = [a.value for a in Axis if a is not Axis.MB]
        bad = [f"{k}={v!r}" for k, v in axes.items()
               if k not in valid or not isinstance(v, int) or isinstance(v, bool) or v <= 0]
        if bad or not axes:
            raise PlanError(f"{self.site}: Mesh({', '.join(bad) or ''}): axes are {valid} with "
                            "positive integer sizes, e.g. Mesh(dp=2, tp=4)")
        self.sizes: dict[str, int] = dict(axes)

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(self.sizes)

    @property
    def world_size(self) -> int:
        n = 1
        for v in self.sizes.values():
            n *= v
        return n

    def __getitem__(self, axis: str) -> int:
        return self.sizes[str(axis)]

    def __contains__(self, axis: object) -> bool:
        return str(axis) in self.sizes

    def __iter__(self) -> Iterator[str]:
        return iter(self.sizes)

    def __repr__(self) -> str:
        return "Mesh(" + ", ".join(f"{k}={v}" for k, v in self.sizes.items()) + ")"
