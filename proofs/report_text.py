"""The assumptions line and the self-check line of ``prove``'s human output (``docs/cli.md``).

A verdict rests on its assumptions, so ``prove`` prints them all; a torch plan has a dozen, some
of them long, which on one line made about 1,800 characters (new-user trial, stop 51). Short
lists stay on one line; longer ones are one item per line, wrapped, every line indented, so no
line of an assumption can start like a verdict line (user text with a newline included).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

__all__ = ["assumption_lines", "check_line", "checker_says"]

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


def checker_says(check: Any) -> str:
    """What the self-check answered (``check``: a ``proofs.isolation.CheckOutcome``)."""
    if check.answer is not None and check.answer.get("valid"):
        return f"accepts the certificate as {check.answer.get('verdict')}"
    reason = (check.answer or {}).get("reason") or check.error or "no reason given"
    return f"rejects it (exit {check.code}): {' '.join(str(reason).split())}"


def check_line(verdict: str, check: Any, agrees: bool, ran_s: float) -> str:
    """One line on the independent check of prove's own certificate. Its seconds are named: the
    checker's process starts with the proof and re-traces the plan meanwhile (``ran_s``: its
    whole life), then checks the certificate once written (``check.seconds``: prove's wait for
    it, the summary table's ``check s``). A re-trace's own time is not reported by the checker:
    it is at most ``ran_s`` (new-user trial 53, item A: ``plan re-traced (1.6 s)`` read as the
    re-trace's time)."""
    if agrees:
        a = check.answer
        how = ("plan re-traced in that process, alongside the proof" if a.get("retraced")
               else "plan not re-traced")
        return (f"check: certificate re-checked by check-certificate in a fresh process: verdict "
                f"{a.get('verdict')}, {a.get('proved')} of {a.get('obligations')} goals, "
                f"{a.get('steps')} steps, {how} (checker ran {ran_s:.1f} s in all, "
                f"{check.seconds:.1f} s after the certificate was written)")
    return f"check: DISAGREES: prove says {verdict}; check-certificate {checker_says(check)}"
