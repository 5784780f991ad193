"""``prove``'s progress on stderr, per phase, in the summary table's numbers (``docs/cli.md``).

Two feeds: ``progress(phase, done, total)`` within a phase (the prover's counts of goals or
lemmas), and ``finished(phase, seconds, unit)`` when a phase ends, with the seconds that the
summary table adds to its ``<phase> s`` column (``proofs.prover.prove``'s ``on_phase``; the
CLI's own phases ``trace``, ``load``, ``certificate`` and ``check`` the same way). Each
finished line shows that phase's total so far, so the last line of a phase and the table
agree (issue 12, item 6). A phase that counted something is always reported; one that did not
is reported when its total reaches :data:`REPORT_S` seconds, and again when a later run of a
shown phase changes the total it shows.

A rich progress bar when stderr is a terminal (finished lines are printed above it); otherwise
plain lines, ``prove: rewrite: 61/61 lemmas, 0.8 s``, plus at most one line per
:data:`PLAIN_EVERY_S` seconds inside a long phase; nothing when disabled (``--json``).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "REPORT_S", "PLAIN_EVERY_S"]

REPORT_S = 1.0        # a phase without counts is reported when it took at least this long
PLAIN_EVERY_S = 10.0  # at most one plain line per this many seconds inside a phase


class Progress:
    """Progress over goals (or lemmas), per phase, on ``stream`` (default: ``sys.stderr``)."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        self.counts: dict[str, tuple[int, int]] = {}   # phase -> (done, total), this run of it
        self.started: dict[str, float] = {}            # phase -> start of this run of it
        self.printed: dict[str, float] = {}            # phase -> last interim line
        self.seconds: dict[str, float] = {}            # phase -> total so far (the table's)
        self.shown: dict[str, str] = {}                # phase -> the total its last line showed

    def __enter__(self) -> Progress:
        if self.enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, \
                TimeElapsedColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn("{task.description:>11}"), BarColumn(),
                           MofNCompleteColumn(), TimeElapsedColumn(),
                           console=Console(file=self.stream), transient=True)
            self.bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def begin(self, phase: str) -> None:
        """A phase without counts starts (shown on the bar while it runs)."""
        self(phase, 0, 1)
        self.counts.pop(phase, None)

    def __call__(self, phase: str, done: int, total: int) -> None:
        """``done`` of ``total`` items of ``phase`` are finished (within the phase)."""
        if not self.enabled:
            return
        now = time.monotonic()
        start = self.started.setdefault(phase, now)
        self.counts[phase] = (done, total)
        if self.bar is not None:
            if phase not in self.tasks:
                self.tasks[phase] = self.bar.add_task(phase, total=max(total, 1))
            self.bar.update(self.tasks[phase], completed=done, total=max(total, 1))
            return
        if 0 < total and done < total \
                and now - self.printed.get(phase, start) >= PLAIN_EVERY_S:
            self.printed[phase] = now
            self._line(f"prove: {phase}: {done}/{total} so far, {now - start:.1f} s")

    def finished(self, phase: str, seconds: float, unit: str = "goals") -> None:
        """``phase`` ended after ``seconds`` (added to its total, which the line shows).

        Reported: a run of the phase that counted something; else a total of at least
        :data:`REPORT_S`, or a change of an already shown total (so the last line of every shown
        phase is the summary table's number)."""
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        counts = self.counts.pop(phase, None)
        self.started.pop(phase, None)
        self.printed.pop(phase, None)
        if self.bar is not None and phase in self.tasks:
            self.bar.remove_task(self.tasks.pop(phase))
        if not self.enabled:
            return
        shown = f"{self.seconds[phase]:.1f} s"
        if counts is not None and counts[1] > 0:
            self._line(f"prove: {phase}: {counts[0]}/{counts[1]} {unit}, {shown}")
        elif (self.seconds[phase] >= REPORT_S or phase in self.shown) \
                and self.shown.get(phase) != shown:
            self._line(f"prove: {phase}: {shown}")
        else:
            return
        self.shown[phase] = shown

    def _line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text, highlight=False, markup=False)
        else:
            print(text, file=self.stream, flush=True)
