"""The assumptions line of ``prove``'s human output (``docs/cli.md``, "Output").

A verdict rests on its assumptions, so ``prove`` prints them all; a torch plan has a dozen, some
of them long, which on one line made about 1,800 characters (new-user trial, stop 51). Short
lists stay on one line; longer ones are one item per line, wrapped, every line indented, so no
line of an assumption can start like a verdict line (user text with a newline included).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

__all__ = ["assumption_lines"]

WIDTH = 100


def assumption_lines(items: Sequence[str], width: int = WIDTH) -> list[str]:
    """``["assumptions: a; b"]`` when that fits in ``width`` columns, else the header line
    ``assumptions: N, one per line`` and each item as ``  - ...`` wrapped at ``width`` with
    continuation lines indented by four spaces. Newlines in an item become spaces."""
    flat = [" ".join(str(x).split()) for x in items]
    one = "assumptions: " + "; ".join(flat)
    if len(one) <= width:
        return [one]
    out = [f"assumptions: {len(flat)}, one per line"]
    for x in flat:
        out.extend(textwrap.wrap(x, width=width, initial_indent="  - ",
                                 subsequent_indent="    ", break_on_hyphens=False) or ["  -"])
    return out
