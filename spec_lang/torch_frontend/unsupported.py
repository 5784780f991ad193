"""APIs that ``prove --torch`` does not model yet, refused with the user's line before any
verdict (exit 3).

* ``torch.distributed.pipelining`` (issue 11, pipelining groundwork): a ``PipelineStage`` (or
  ``build_stage``'s ``_PipelineStage``), any pipeline schedule (``ScheduleGPipe``,
  ``Schedule1F1B``, the interleaved and zero-bubble ones) or the tracer front end
  ``pipeline()`` built during the capture, or a stage's forward / backward chunk run in it.
  Left to the capture, a schedule stops at its static/dynamic shape vote under the fake
  process group (torch 2.13.0:
  ``GuardOnDataDependentSymNode: ... Eq(u0, 1)`` at the user's ``schedule.step``), which names
  no pipelining. The design of the lowering is in ``docs/torch.md``, "Pipelining: design (not
  yet proved)".

The refusal is a message, not a soundness mechanism: what it stops would not be proved either.
It raises where the object is built and, should the user's code catch that exception, again
when the traced function returns (:func:`refuse_pipelining` yields the list of uses).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.styles import _user_site

__all__ = ["refuse_pipelining", "check_no_pipelining", "PIPELINING_DOC"]

PIPELINING_DOC = "docs/torch.md, 'Pipelining: design (not yet proved)'"


def _message(site: str, what: str) -> str:
    return (f"{site}: pipeline parallelism (torch.distributed.pipelining {what}) is not "
            f"supported yet by prove --torch: no verdict is given for a pipelined step "
            f"({PIPELINING_DOC}); prove the stages' data/tensor parallelism without the "
            "pipeline split")


@contextlib.contextmanager
def refuse_pipelining(path: str) -> Iterator[list[str]]:
    """Within the block, building a pipeline stage, a pipeline schedule or a traced ``Pipe``, or
    running a stage's forward or backward chunk, raises :class:`PlanError` naming the innermost
    line of the train file or a module beside it.

    Yields the messages of every use (so that a use whose exception the user's code swallowed
    is still refused by :func:`check_no_pipelining`).
    """
    from torch.distributed.pipelining import _IR, schedules, stage

    used: list[str] = []
    classes = (stage._PipelineStageBase, schedules._PipelineSchedule)  # noqa: SLF001
    inits = {c: c.__dict__["__init__"] for c in classes}
    from_tracing = _IR.Pipe.__dict__["from_tracing"]

    def refuse(what: str) -> None:
        msg = _message(_user_site(path), what)
        used.append(msg)
        raise PlanError(msg)

    def wrap(init: Any) -> Any:
        def __init__(self: Any, *a: Any, **k: Any) -> None:  # noqa: N807, ARG001
            refuse(type(self).__name__)
        __init__.__wrapped__ = init
        return __init__

    def traced(cls: Any, *a: Any, **k: Any) -> Any:  # noqa: ARG001
        refuse("pipeline()")

    # a stage built before the capture (at the train file's import) is refused when it runs
    base = stage._PipelineStageBase  # noqa: SLF001
    runs = {m: base.__dict__[m] for m in ("forward_one_chunk", "backward_one_chunk")}

    def run(name: str) -> Any:
        def method(self: Any, *a: Any, **k: Any) -> None:  # noqa: ARG001
            refuse(f"{type(self).__name__}.{name}")
        return method

    for c, init in inits.items():
        c.__init__ = wrap(init)
    for m in runs:
        setattr(base, m, run(m))
    _IR.Pipe.from_tracing = classmethod(traced)
    try:
        yield used
    finally:
        for c, init in inits.items():
            c.__init__ = init
        for m, f in runs.items():
            setattr(base, m, f)
        _IR.Pipe.from_tracing = from_tracing


def check_no_pipelining(used: list[str]) -> None:
    """Raise the first refusal recorded by :func:`refuse_pipelining`, if any.

    Raises:
        PlanError: pipelining was used (and the user's code caught the first refusal).
    """
    if used:
        raise PlanError(used[0])
