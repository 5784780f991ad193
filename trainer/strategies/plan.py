"""Recovery plans: what a strategy does to the stages, as data, and the in-process executor.

A plan is a tuple of *steps*. A step says which node sends which state where and what the
receiver makes of it; it holds no tensors. The same plan runs in two places:

- `InProcessExecutor` (here) applies it to a `PipelineTrainer` in one process: the simulator's
  harness, where the simpy clock prices the plan's actions;
- `trainer.distributed.executor` runs it on real stage processes, where every step that names
  two nodes is a real gloo transfer between two OS processes (docs/real-runs.md).

So a strategy written as a planner (`trainer.strategies.planned.PlannedStrategy`) decides once
and both runs carry out the same decision. Copies of a stage's state live on a *holder* node and
die with it (`InProcessExecutor.lose`), as they would in a node's memory.

Steps (a node is named by the stage it runs; stage 0 is the embedding stage):

| step | meaning |
|---|---|
| `Restart(stage)` | a replacement node joins (the executors do nothing; the real driver already started it) |
| `Hold(src, holder, parts)` | `holder` keeps a copy of `src`'s live state; `holder == src` is a local copy |
| `Rebuild(stage, sources, denominator, parts, optimizer, lr_scale)` | `W_stage = (sum_i c_i W_i) / denominator` over the sources' live state or held copies; Adam fresh, or the same combination of the sources' moments |
| `Reinit(stage, lr_scale)` | the model's random init (a new seed per call) and a fresh Adam |
| `SetLrScale(stage, lr_scale)` | change the LR multiplier, keep the Adam state |
| `SaveCheckpoint()` / `LoadCheckpoint()` | whole model, Adam and data position to / from storage |
| `MarkDataPosition(tag)` / `RestoreDataPosition(tag)` | the driver remembers / returns to an iteration count and data position |
| `Rollback(to_iteration)` | the simulator's clock re-runs the iterations after `to_iteration` |

`parts` is `"weights"` (the stage's parameters) or `"full"` (parameters, Adam moments and step,
LR multiplier). Bytes of a part: `stage_param_bytes` and `+ stage_optimizer_bytes` for `"full"`
(docs/harness-contract.md). `plan_actions` turns a plan into the contract's cost actions: one
`Transfer` per step that moves state between two nodes, `StorageWrite` / `StorageRead` of the whole
model per checkpoint step, and the plan's `Restart` and `Rollback` steps.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from trainer.errors import StrategyError
from trainer.strategies.base import Action, Restart, Rollback, StorageRead, StorageWrite, Transfer

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

    from trainer.pipeline import PipelineTrainer, StageState

__all__ = [
    "PARTS",
    "OPTIMIZER_MODES",
    "Source",
    "Hold",
    "Rebuild",
    "Reinit",
    "SetLrScale",
    "SaveCheckpoint",
    "LoadCheckpoint",
    "MarkDataPosition",
    "RestoreDataPosition",
    "Step",
    "PipelineView",
    "part_bytes",
    "plan_actions",
    "combine",
    "InProcessExecutor",
]

PARTS = ("weights", "full")
OPTIMIZER_MODES = ("fresh", "moved")


@dataclass(frozen=True)
class Source:
    """One input of a `Rebuild`: the state `node` sends, weighted by `coefficient`.

    `copy_of=None` is the node's live stage (then `node` is that stage); `copy_of=s` is the copy
    of stage s that `node` holds (a replica, a stale copy, an in-memory checkpoint).
    """

    node: int
    coefficient: float = 1.0
    copy_of: int | None = None

    @property
    def stage(self) -> int:
        """The stage whose state this source carries."""
        return self.node if self.copy_of is None else self.copy_of


@dataclass(frozen=True)
class Hold:
    """`holder` keeps a copy of stage `src`'s live state (`parts`); replaces its previous copy of src.

    `priced=False` when the strategy accounts for the copy elsewhere (redundant computation with
    `forward_cost="double"` prices its replica refresh by its forward multiplier, docs/trainer.md);
    the real run moves it anyway. `background=True`: the copy overlaps the next iteration (its
    `Transfer.background`, priced concurrently by the simulator, issue 15). `priced_parts`: the
    parts the cost action counts when they differ from what is held (redundant computation keeps
    a full replica current by sending the new weights only: "weights"); None: `parts`.
    """

    src: int
    holder: int
    parts: str = "full"
    priced: bool = True
    background: bool = False
    priced_parts: str | None = None

    def __post_init__(self) -> None:
        _check_parts(self.parts)
        if self.priced_parts is not None:
            _check_parts(self.priced_parts)


@dataclass(frozen=True)
class Rebuild:
    """W_stage = (sum_i sources[i].coefficient * W(sources[i])) / denominator, then an optimizer.

    `optimizer="fresh"`: zero Adam moments and step 0 with LR x `lr_scale` (CheckFree section 4.1).
    `optimizer="moved"` (needs `parts="full"`): the Adam moments are combined with the same
    coefficients and the step count is the combination rounded; with one source of coefficient 1
    and denominator 1 this is an exact copy. `lr_scale=None` keeps the single source's own LR scale.
    """

    stage: int
    sources: tuple[Source, ...]
    denominator: float = 1.0
    parts: str = "weights"
    optimizer: str = "fresh"
    lr_scale: float | None = 1.0

    def __post_init__(self) -> None:
        _check_parts(self.parts)
        if self.optimizer not in OPTIMIZER_MODES:
            raise StrategyError(f"Rebuild optimizer must be one of {OPTIMIZER_MODES}, got {self.optimizer!r}")
        if self.optimizer == "moved" and self.parts != "full":
            raise StrategyError("Rebuild optimizer='moved' needs parts='full' (the sources' Adam state)")
        if not self.sources:
            raise StrategyError(f"Rebuild of stage {self.stage} has no sources (use Reinit)")
        if not (math.isfinite(self.denominator) and self.denominator > 0):
            raise StrategyError(f"Rebuild denominator must be a finite number > 0, got {self.denominator!r}")
        if self.lr_scale is None and (len(self.sources) != 1 or self.parts != "full"):
            raise StrategyError("Rebuild lr_scale=None (keep the source's) needs one source with parts='full'")
        if self.lr_scale is not None and not self.lr_scale > 0:
            raise StrategyError(f"Rebuild lr_scale must be > 0, got {self.lr_scale!r}")


@dataclass(frozen=True)
class Reinit:
    """Random re-initialisation of `stage` (the model's init, a new seed) with a fresh Adam."""

    stage: int
    lr_scale: float = 1.0


@dataclass(frozen=True)
class SetLrScale:
    """Set `stage`'s LR multiplier; its Adam state is kept."""

    stage: int
    lr_scale: float


@dataclass(frozen=True)
class SaveCheckpoint:
    """Every stage's weights and Adam state, the data position and the iteration count, to storage."""


@dataclass(frozen=True)
class LoadCheckpoint:
    """Every stage, the data position and the iteration count back from the last `SaveCheckpoint`."""


@dataclass(frozen=True)
class MarkDataPosition:
    """The driver remembers the current iteration count and data position under `tag`."""

    tag: str


@dataclass(frozen=True)
class RestoreDataPosition:
    """The driver returns to the iteration count and data position remembered under `tag`."""

    tag: str


Step = (Restart | Hold | Rebuild | Reinit | SetLrScale | SaveCheckpoint | LoadCheckpoint | MarkDataPosition
        | RestoreDataPosition | Rollback)


class PipelineView(Protocol):
    """What a planner may read about the pipeline: its stages and their sizes, never tensors.

    A `PipelineTrainer` is one; the real run's driver provides another (trainer.distributed).
    """

    n_stages: int

    def stage_param_bytes(self, stage: int) -> int: ...

    def stage_optimizer_bytes(self, stage: int) -> int: ...


def _check_parts(parts: str) -> None:
    if parts not in PARTS:
        raise StrategyError(f"state parts must be one of {PARTS}, got {parts!r}")


def part_bytes(view: PipelineView, stage: int, parts: str) -> int:
    """Bytes of `stage`'s `parts`: parameters, plus Adam state for "full" (fp32)."""
    _check_parts(parts)
    n = view.stage_param_bytes(stage)
    return n + view.stage_optimizer_bytes(stage) if parts == "full" else n


def _model_bytes(view: PipelineView) -> int:
    return sum(part_bytes(view, s, "full") for s in range(view.n_stages + 1))


def _all_stages(view: PipelineView) -> tuple[int, ...]:
    return tuple(range(view.n_stages + 1))


def plan_actions(steps: Iterable[Step], view: PipelineView) -> list[Action]:
    """The cost actions of a plan, in order (docs/harness-contract.md): what the simulator prices.

    Every Transfer / StorageWrite / StorageRead says its content (`of_stages`, `optimizer`), so a
    cluster that models a bigger model prices it with that model's bytes (issue 15).
    """
    actions: list[Action] = []
    for step in steps:
        match step:
            case Restart() | Rollback():
                actions.append(step)
            case Hold(src=src, holder=holder, parts=parts, priced=priced):
                if holder != src and priced:
                    p = step.priced_parts or parts
                    actions.append(Transfer(src, holder, part_bytes(view, src, p), of_stages=(src,),
                                            optimizer=p == "full", background=step.background))
            case Rebuild(stage=stage, sources=sources, parts=parts):
                actions += [Transfer(s.node, stage, part_bytes(view, stage, parts), of_stages=(s.stage,),
                                     optimizer=parts == "full") for s in sources if s.node != stage]
            case SaveCheckpoint():
                actions.append(StorageWrite(_model_bytes(view), of_stages=_all_stages(view), optimizer=True))
            case LoadCheckpoint():
                actions.append(StorageRead(_model_bytes(view), of_stages=_all_stages(view), optimizer=True))
            case Reinit() | SetLrScale() | MarkDataPosition() | RestoreDataPosition():
                pass
            case _:
                raise StrategyError(f"unknown plan step {step!r}")
    return actions


def combine(tensors: Sequence[torch.Tensor], coefficients: Sequence[float], denominator: float) -> torch.Tensor:
    """(c_0 t_0 + c_1 t_1 + ...) / denominator, evaluated left to right.

    The order of CheckFree's `(a * W_{i+1} + b * W_{i-1}) / (a + b)` (section 4.1), so a plan
    reproduces it bit for bit; one term with c = d = 1 returns an exact copy.
    """
    acc = coefficients[0] * tensors[0]
    for c, t in zip(coefficients[1:], tensors[1:], strict=True):
        acc = acc + c * t
    return acc / denominator


def _combine_adam(states: Sequence[Mapping[str, Any]], coefficients: Sequence[float], denominator: float,
                  n_params: int, template: Mapping[str, Any]) -> dict[str, Any]:
    """Combine Adam state_dicts (moments by `combine`, step rounded); missing state counts as zero."""
    import torch

    out = copy.deepcopy(dict(template))
    out["state"] = {}
    shapes = None
    for idx in range(n_params):
        entries = [s["state"].get(idx) for s in states]
        if all(e is None for e in entries):
            continue
        shapes = next(e for e in entries if e is not None)
        zeros = {k: torch.zeros_like(v) for k, v in shapes.items()}
        full = [e if e is not None else zeros for e in entries]
        step = sum(c * float(e["step"]) for c, e in zip(coefficients, full)) / denominator
        out["state"][idx] = {
            "step": torch.tensor(float(round(step))),
            "exp_avg": combine([e["exp_avg"] for e in full], coefficients, denominator),
            "exp_avg_sq": combine([e["exp_avg_sq"] for e in full], coefficients, denominator),
        }
    return out


class InProcessExecutor:
    """Runs plans on a `PipelineTrainer`; copies held by a node die with it (`lose`).

    Storage (checkpoints) and the driver's remembered data positions survive every failure.
    """

    def __init__(self, trainer: PipelineTrainer):
        self.trainer = trainer
        self._copies: dict[tuple[int, int], StageState] = {}  # (holder, stage) -> copy
        self._checkpoint = None
        self._marks: dict[str, tuple[int, Any]] = {}

    def holds(self, holder: int, stage: int) -> bool:
        """True when `holder` keeps a copy of `stage`."""
        return (holder, stage) in self._copies

    def lose(self, stage: int) -> None:
        """The node of `stage` is gone: its weights and Adam state, and every copy it held."""
        self.trainer.lose_stage(stage)
        for key in [k for k in self._copies if k[0] == stage]:
            del self._copies[key]

    def run(self, steps: Iterable[Step]) -> None:
        """Apply the steps in order."""
        t = self.trainer
        for step in steps:
            match step:
                case Restart() | Rollback():
                    pass
                case Hold(src=src, holder=holder, parts=parts):
                    state = t.stage_state(src)
                    if parts == "weights":
                        state = type(state)(weights=state.weights, optimizer={}, lr_scale=state.lr_scale)
                    self._copies[(holder, src)] = state
                case Rebuild():
                    self._rebuild(step)
                case Reinit(stage=stage, lr_scale=lr):
                    t.reinit_stage(stage, lr)
                case SetLrScale(stage=stage, lr_scale=lr):
                    t.set_lr_scale(stage, lr)
                case SaveCheckpoint():
                    self._checkpoint = t.snapshot()
                case LoadCheckpoint():
                    if self._checkpoint is None:
                        raise StrategyError("LoadCheckpoint before any SaveCheckpoint")
                    t.restore(self._checkpoint)
                case MarkDataPosition(tag=tag):
                    self._marks[tag] = (t.iteration, t.data_state())
                case RestoreDataPosition(tag=tag):
                    if tag not in self._marks:
                        raise StrategyError(f"RestoreDataPosition({tag!r}) before MarkDataPosition")
                    iteration, state = self._marks[tag]
                    t.set_data_state(state, iteration)
                case _:
                    raise StrategyError(f"unknown plan step {step!r}")

    def _source_state(self, source: Source, parts: str):
        t = self.trainer
        if source.copy_of is None:
            return t.stage_state(source.node) if parts == "full" else None, t.stage_weights(source.node)
        state = self._copies.get((source.node, source.copy_of))
        if state is None:
            raise StrategyError(f"node {source.node} holds no copy of stage {source.copy_of}")
        if parts == "full" and not state.optimizer:
            raise StrategyError(f"node {source.node} holds only the weights of stage {source.copy_of}")
        return state, state.weights

    def _rebuild(self, step: Rebuild) -> None:
        t = self.trainer
        got = [self._source_state(s, step.parts) for s in step.sources]
        coefficients = [s.coefficient for s in step.sources]
        names = list(got[0][1])
        weights = {k: combine([w[k] for _, w in got], coefficients, step.denominator) for k in names}
        t.set_stage_weights(step.stage, weights)
        if step.optimizer == "fresh":
            t.reset_optimizer(step.stage, step.lr_scale)
            return
        states = [state for state, _ in got]
        lr = states[0].lr_scale if step.lr_scale is None else step.lr_scale
        t.reset_optimizer(step.stage, lr)
        n_params = sum(1 for _ in t.stages[step.stage].parameters())
        template = t.optimizer(step.stage).state_dict()
        adam = _combine_adam([s.optimizer for s in states], coefficients, step.denominator, n_params, template)
        t.optimizer(step.stage).load_state_dict(adam)
