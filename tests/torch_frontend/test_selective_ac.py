"""Selective activation checkpointing (torch's ``create_selective_checkpoint_contexts``, what
torchtitan's ``apply_ac`` uses with ``mode="selective"``) in the capture.

* Under FSDP2 / ``replicate`` the recomputation's gather runs outside SAC's dispatch modes
  (``recompute.outside_selective_checkpoint``; R40a-6: exit 3 before).
* Under ``make_fx`` torch's SAC saves every operator and recomputes none; the capture sets its
  decision to the eager run's (``eager_paths``), so a recomputation that differs from the
  forward is seen (it was EQUIVALENT before: ``ac_plans/sac_recompute_differs_from_forward_
  wrong.py``).

Unit tests run in seconds; the end-to-end proves are ``slow`` (20-50 s each).
"""

from __future__ import annotations

import functools
import types
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils.checkpoint import (
    CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts)

AC_PLANS = Path(__file__).resolve().parent / "ac_plans"


def _save_mm(ctx, op, *args, **kwargs):  # noqa: ARG001
    return (CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default
            else CheckpointPolicy.PREFER_RECOMPUTE)


SAC = functools.partial(create_selective_checkpoint_contexts, _save_mm)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(3, 4, bias=False, dtype=torch.float64)
        self.w2 = nn.Linear(4, 3, bias=False, dtype=torch.float64)

    def forward(self, x):
        return self.w2(torch.tanh(self.w1(x)))


def test_the_recomputations_gather_runs_outside_sacs_log(monkeypatch) -> None:
    """R40a-6: a unit over a SAC-wrapped block; its view (``stored * 1``: an operator SAC's
    forward log does not hold) is made again for the recomputation, in the backward, and the
    gradients are the block's."""
    from spec_lang.torch_frontend import dataparallel as dp

    torch.manual_seed(0)
    block = _Block()
    wrapper = checkpoint_wrapper(block, context_fn=SAC)
    made: list[bool] = []

    def view(u, stored, orig):  # noqa: ARG001
        made.append(torch._C._current_graph_task_id() != -1)  # noqa: SLF001
        return stored * 1.0

    monkeypatch.setattr(dp, "unit_view", view)
    u = types.SimpleNamespace(kind="fsdp", fsdp_state=True, module=wrapper,   # resharding (S42-1)
                              settings={"reshard_after_forward": True})
    new = {"w1.weight": block.w1.weight, "w2.weight": block.w2.weight}
    owner = {"w1.weight": (u, [(block.w1, "weight")]), "w2.weight": (u, [(block.w2, "weight")])}
    hooks = dp.install_units([u], owner, new, dict(new))
    try:
        x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
        wrapper(x).pow(2).sum().backward()       # raised "not found in storage" before
        assert made == [False, False, True, True]
        assert block.w1.weight is new["w1.weight"] and block.w2.weight is new["w2.weight"]
        want = torch.autograd.grad(_Block.forward(block, x.detach()).pow(2).sum(),
                                   [block.w1.weight, block.w2.weight])
        for p, g in zip(new.values(), want):
            assert torch.allclose(p.grad, g, rtol=0, atol=1e-12)
    finally:
        for h in hooks:
            h.remove()


def test_only_sacs_own_modes_are_taken_off_and_put_back() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

    from spec_lang.torch_frontend.recompute import outside_selective_checkpoint

    class Other(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    fwd, _ = SAC()
    with fwd:
        with outside_selective_checkpoint() as taken:
            assert fwd not in _get_current_dispatch_mode_stack() and taken == [fwd]
        assert _get_current_dispatch_mode_stack()[-1] is fwd
        with Other() as other:                  # a mode above SAC's: nothing is taken off
            with outside_selective_checkpoint():
                assert _get_current_dispatch_mode_stack()[-2:] == [fwd, other]
    with pytest.raises(KeyError):
        with fwd:
            with outside_selective_checkpoint():
                raise KeyError("x")
    assert fwd not in _get_current_dispatch_mode_stack()   # put back, then left by `with`


def _sac_step(x, w1, w2, scale):
    def block(x):
        return torch.tanh(x @ w1 * scale[0]) @ w2

    y = checkpoint(block, x, use_reentrant=False, context_fn=SAC)
    scale[0] = 2.0                         # read again by the recomputation only
    g = torch.autograd.grad(y.sum(), [w1, w2])
    scale[0] = 1.0
    return g


def _traced_tanh_count(eager: bool) -> int:
    from spec_lang.torch_frontend.eager_paths import eager_paths

    args = (torch.randn(5, 3, dtype=torch.float64),
            torch.randn(3, 4, dtype=torch.float64, requires_grad=True),
            torch.randn(4, 3, dtype=torch.float64, requires_grad=True))

    def f(x, w1, w2):
        return _sac_step(x, w1, w2, [1.0])

    if eager:
        with eager_paths():
            gm = make_fx(f)(*args)
    else:
        gm = make_fx(f)(*args)
    return sum(n.target is torch.ops.aten.tanh.default for n in gm.graph.nodes)


def test_sac_under_make_fx_recomputes_as_the_eager_run_does() -> None:
    """torch's SAC under a proxy mode saves every operator (no recomputation in the graph); in
    :func:`eager_paths` the recomputed ``tanh`` is in the graph, as the eager run runs it."""
    assert _traced_tanh_count(eager=False) == 1
    assert _traced_tanh_count(eager=True) == 2


def test_eager_paths_restores_torchs_function() -> None:
    import torch.utils.checkpoint as ck

    from spec_lang.torch_frontend.eager_paths import eager_paths

    own = ck._is_compiling  # noqa: SLF001
    with pytest.raises(ValueError):
        with eager_paths():
            assert ck._is_compiling(None, (), {}) is False  # noqa: SLF001
            raise ValueError
    assert ck._is_compiling is own  # noqa: SLF001


def test_the_eager_recomputation_gives_the_eager_gradients() -> None:
    """The traced step (in :func:`eager_paths`) run on real tensors equals the eager run,
    whose recomputation read the changed scale (float64, atol 1e-12)."""
    from spec_lang.torch_frontend.eager_paths import eager_paths

    torch.manual_seed(1)
    args = (torch.randn(5, 3, dtype=torch.float64),
            torch.randn(3, 4, dtype=torch.float64, requires_grad=True),
            torch.randn(4, 3, dtype=torch.float64, requires_grad=True))

    def f(x, w1, w2):
        return _sac_step(x, w1, w2, [1.0])

    with eager_paths():
        gm = make_fx(f)(*args)
    eager = f(*args)
    plain = torch.autograd.grad((torch.tanh(args[0] @ args[1]) @ args[2]).sum(), args[1:])
    for a, b, c in zip(gm(*args), eager, plain):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)
        assert not torch.allclose(a, c, rtol=0, atol=1e-3)   # the recomputation differs


def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name,rc,verdict", [
    # truths (tests/adversarial/torch4_truth.py, 2 steps, real gloo FSDP2) in each docstring
    ("sac_fsdp_block_and_root_right.py", 0, "EQUIVALENT"),          # exit 3 before (R40a-6)
    ("sac_fsdp_divide_factor_one_buggy.py", 1, "NOT EQUIVALENT"),
    ("sac_recompute_differs_from_forward_wrong.py", 1, "NOT EQUIVALENT"),   # EQUIVALENT before
])
def test_selective_ac_end_to_end(tmp_path, name, rc, verdict) -> None:
    out = _prove(AC_PLANS / name, tmp_path)
    assert out["_rc"] == rc and out.get("verdict") == verdict, out
    if name.endswith("_buggy.py"):
        cx = out["counterexample"]
        assert cx["ratio"] == "2" and cx["rank"] == {"dp": 0}, cx
        assert cx["goal"].startswith("grad:inner.w"), cx
        assert "divide factor 1 set at" in cx["placement"], cx


def test_a_shard_written_between_its_gather_and_the_backward_is_refused() -> None:
    """R41a-1: the capture's gather is a fresh tensor; FSDP2's is re-gathered for the backward
    (its saved views then read the new value). A write in between is refused."""
    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.recompute import gathered_then_written

    stored = torch.zeros(4)                         # the parameter (a DTensor in the capture)
    from spec_lang.torch_frontend.recompute import param_versions

    ctx = types.SimpleNamespace(stored=stored, version=param_versions(stored), site="t.py:7")
    gathered_then_written(ctx)                      # unchanged: nothing raised
    with torch.no_grad():
        stored.mul_(2)                              # the parameter, written in the step
    with pytest.raises(PlanError, match=r"^t\.py:7: a parameter of fully_shard is written in "
                                        r"place between its all-gather"):
        gathered_then_written(ctx)


def test_a_saved_view_of_a_gathered_parameter_is_refused(monkeypatch) -> None:
    """R41c-4: a SAC policy saving ``aten.t`` (the weight's transpose, a view of FSDP2's
    unsharded storage, which the backward's all-gather refills) under a fully_shard unit is
    refused at the recomputation; ``aten.mm`` (above) is not."""
    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend import dataparallel as dp

    def save_t(ctx, op, *args, **kwargs):  # noqa: ARG001
        return (CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.t.default
                else CheckpointPolicy.PREFER_RECOMPUTE)

    torch.manual_seed(0)
    block = _Block()
    wrapper = checkpoint_wrapper(
        block, context_fn=functools.partial(create_selective_checkpoint_contexts, save_t))
    monkeypatch.setattr(dp, "unit_view", lambda u, stored, orig: stored * 1.0)
    u = types.SimpleNamespace(kind="fsdp", fsdp_state=True, module=wrapper,
                              settings={"_site": "t.py:9"})
    new = {"w1.weight": block.w1.weight, "w2.weight": block.w2.weight}
    owner = {"w1.weight": (u, [(block.w1, "weight")]), "w2.weight": (u, [(block.w2, "weight")])}
    hooks = dp.install_units([u], owner, new, dict(new))
    try:
        x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
        with pytest.raises(PlanError, match=r"^t\.py:9: selective activation checkpointing "
                                            r"under fully_shard saves the output of aten\.t"):
            wrapper(x).pow(2).sum().backward()
    finally:
        for h in hooks:
            h.remove()
