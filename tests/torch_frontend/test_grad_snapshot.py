"""When the capture reads the gradient goals (:mod:`spec_lang.torch_frontend.grad_snapshot`):
the first entry into ``clip_grad_norm_``, ``clip_grads_with_norm_`` or the optimizer's
``step``, before any clipping (R41e-3: torchtitan's ``get_total_norm`` +
``clip_grads_with_norm_`` read after the clip, a false NOT EQUIVALENT). Eager, in seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
import torch.nn.utils as nnu
import torch.nn.utils.clip_grad as cg
from torch import nn

from spec_lang.torch_frontend.grad_snapshot import (GRADS_READ_AT, drop_grads_read_apart,
                                                    logs_only, snapshot_on_entry)

MAX_NORM = 0.05


def _model() -> tuple[nn.Module, list[torch.Tensor]]:
    """A linear layer whose gradients (norm well above ``MAX_NORM``) are set by hand."""
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    for p in m.parameters():
        p.grad = torch.randn_like(p) * 3
    return m, [p.grad.clone() for p in m.parameters()]


def _recorder(m: nn.Module) -> tuple[list[list[torch.Tensor]], object]:
    seen: list[list[torch.Tensor]] = []

    def snapshot() -> None:
        seen.append([p.grad.clone() for p in m.parameters()])
    return seen, snapshot


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_torchtitans_clip_is_read_before_it_scales_the_gradients():
    """``get_total_norm`` (a read, no trigger), the pp all-reduce's place, then
    ``clip_grads_with_norm_``: the snapshot holds the unclipped gradients (R41e-3)."""
    m, before = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    seen, snapshot = _recorder(m)
    with snapshot_on_entry(opt, snapshot):
        total = torch.nn.utils.get_total_norm([p.grad for p in m.parameters()], 2.0)
        assert seen == []                       # reading the norm is no trigger
        torch.nn.utils.clip_grads_with_norm_(m.parameters(), MAX_NORM, total)
        opt.step()
    assert len(seen) == 2 and _same(seen[0], before)
    assert not _same(seen[1], before)           # the step's read comes after the clip
    assert total > MAX_NORM


def test_clip_grad_norm_is_read_before_it_clips():
    """The spec's usual clip: the first call (at entry) sees the unclipped gradients; its
    inner ``_clip_grads_with_norm_`` calls again (the capture keeps only the first)."""
    m, before = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    seen, snapshot = _recorder(m)
    with snapshot_on_entry(opt, snapshot):
        nnu.clip_grad_norm_(m.parameters(), MAX_NORM)
    assert len(seen) == 2 and _same(seen[0], before) and _same(seen[1], before)


def test_the_clip_grad_modules_names_are_wrapped_too():
    m, before = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    seen, snapshot = _recorder(m)
    with snapshot_on_entry(opt, snapshot):
        total = cg._get_total_norm([p.grad for p in m.parameters()])  # noqa: SLF001
        cg._clip_grads_with_norm_(m.parameters(), MAX_NORM, total)    # noqa: SLF001
    assert len(seen) == 1 and _same(seen[0], before)


def test_only_the_captured_optimizers_step_is_a_trigger():
    m, before = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    other = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1)
    seen, snapshot = _recorder(m)
    with snapshot_on_entry(opt, snapshot):
        other.step()
        assert seen == []
        opt.step()
    assert len(seen) == 1 and _same(seen[0], before)


def test_the_real_functions_are_restored_even_on_error():
    real = (nnu.clip_grad_norm_, cg.clip_grad_norm_, nnu.clip_grads_with_norm_,
            cg._clip_grads_with_norm_)  # noqa: SLF001
    m, _ = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="boom"), snapshot_on_entry(opt, lambda: None):
        assert nnu.clip_grads_with_norm_ is not real[2]
        raise RuntimeError("boom")
    assert (nnu.clip_grad_norm_, cg.clip_grad_norm_, nnu.clip_grads_with_norm_,
            cg._clip_grads_with_norm_) == real  # noqa: SLF001
    seen = []
    opt.register_step_pre_hook(lambda *a: None)
    with snapshot_on_entry(opt, lambda: seen.append(1)):
        pass
    opt.step()
    assert seen == []                            # the global pre-hook is gone


def test_where_names_the_point_entered():
    m, _ = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    where: list[str] = []
    with snapshot_on_entry(opt, lambda: None, where):
        nnu.clip_grad_norm_(m.parameters(), MAX_NORM)    # itself, then its inner half
        opt.step()
    assert where == ["clipping", "clipping", "optimizer.step()"]


@dataclass
class _Role:
    kind: str


@dataclass
class _Tr:
    after: dict


@dataclass
class _Cap:
    spec_real: _Tr
    plan_real: _Tr
    plans: list = field(default_factory=list)
    plans_real: list = field(default_factory=list)
    stage_traces: list | None = None


def _outs() -> dict:
    return {"grad:w": (_Role("grad"), 1, None), "w": (_Role("param"), 2, None)}


@pytest.mark.parametrize("spec_at,plan_at,dropped", [
    ("clipping", "clipping", False), ("optimizer.step()", "optimizer.step()", False),
    ("clipping", "optimizer.step()", True),        # a clip by hand in the plan
    ("optimizer.step()", "clipping", True),        # a clip by hand in the spec
    ("clipping", None, False),                     # no gradient read on that side
])
def test_gradients_read_at_two_points_are_not_compared(spec_at, plan_at, dropped):
    """A hand clip on one side (R41e-3's remaining false NOT EQUIVALENT): the gradient goals
    leave, each an ``unsupported`` entry (UNKNOWN at best); the rest is compared."""
    def tr(at):
        return _Tr({} if at is None else {GRADS_READ_AT: at})
    stages = [tr(spec_at), tr(plan_at)]            # a pipeline: one stage reads apart
    cap = _Cap(spec_real=tr(spec_at), plan_real=tr(spec_at), stage_traces=stages)
    unsupported: list = []
    s, p = drop_grads_read_apart(cap, _outs(), _outs(), unsupported)
    assert ("grad:w" not in s and "grad:w" not in p) is dropped
    assert "w" in s and "w" in p
    assert [n for n, _ in unsupported] == (["grad:w"] if dropped else [])
    if dropped:
        assert f"read at {plan_at} in the parallel step" in unsupported[0][1]


def test_the_read_point_is_no_state_difference():
    """It is the gradient goals' business, not a setting the step leaves (UNKNOWN twice)."""
    from spec_lang.torch_frontend.leftover import scalar_state_differences

    assert scalar_state_differences({GRADS_READ_AT: "clipping"},
                                    {GRADS_READ_AT: "optimizer.step()"}) == []


@pytest.mark.parametrize("call", [
    lambda ps: nnu.clip_grad_norm_(ps, float("inf")),
    lambda ps: nnu.clip_grad_norm_(ps, max_norm=float("inf")),
    lambda ps: nnu.clip_grads_with_norm_(ps, float("inf"), torch.tensor(1.0))])
def test_a_norm_only_logged_is_no_read_point(call):
    """S42-2: ``clip_grad_norm_(params, inf)`` (torch's idiom to log the norm) before a
    hand-written reduction was the read point: the plan's unreduced gradients against the
    spec's. It clips nothing; the next point (here ``optimizer.step()``) reads."""
    m, before = _model()
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    seen, snapshot = _recorder(m)
    where: list[str] = []
    with snapshot_on_entry(opt, snapshot, where):
        call(list(m.parameters()))
        assert seen == [] and where == []
        for p in m.parameters():
            p.grad.mul_(2.0)                  # a reduction after the logging call
        opt.step()
    assert where == ["optimizer.step()"] and len(seen) == 1
    assert _same(seen[0], [2.0 * g for g in before])
    assert not logs_only((None, 1e9), {}) and not logs_only((None, True), {})
    assert not logs_only((None,), {"max_norm": -float("inf")})     # R42c-2: -inf clips
    assert logs_only((None, np.float32("inf")), {})                 # R42c-1 (numpy's)
    assert not logs_only((None, torch.tensor(float("inf"))), {})    # a tensor: still read
