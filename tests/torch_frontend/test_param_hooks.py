"""Hooks on a parameter's ``AccumulateGrad`` node (adversarial finding R6-8,
``spec_lang/torch_frontend/param_hooks.py``): the count the front end reads is what torch's own
backward runs, checked against a real backward in float64."""

from __future__ import annotations

import pytest
import torch

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.param_hooks import accumulator_hooks, refuse_parameter_hooks


def _acc(p: torch.Tensor):
    return p.view_as(p).grad_fn.next_functions[0][0]


def _backward(p: torch.Tensor) -> torch.Tensor:
    p.grad = None
    (p * torch.arange(1.0, 4.0, dtype=torch.float64)).sum().backward()
    return p.grad


def test_a_kept_node_with_a_hook_is_counted_and_its_hook_runs_for_real():
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    assert accumulator_hooks(p) == 0
    node, calls = _acc(p), []
    node.register_hook(lambda gi, go: calls.append("post"))
    assert accumulator_hooks(p) == 1
    node.register_prehook(lambda go: calls.append("pre"))
    assert accumulator_hooks(p) == 2
    assert accumulator_hooks(p) == 2          # the probes are removed
    g = _backward(p)
    assert calls == ["pre", "post"]           # torch's backward runs exactly these two
    assert torch.allclose(g, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), atol=1e-12)
    with pytest.raises(PlanError, match=r"t\.py:1: parameter 'w' has a hook on its gradient "
                                        r"accumulator"):
        refuse_parameter_hooks([("w", p)], "t.py")


def test_a_node_nobody_keeps_has_no_hook_for_real_either():
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    calls = []
    _acc(p).register_hook(lambda gi, go: calls.append("post"))   # the node is freed here
    assert accumulator_hooks(p) == 0
    _backward(p)
    assert calls == []
    refuse_parameter_hooks([("w", p)], "t.py")   # nothing to refuse


def test_frozen_and_non_leaf_tensors_have_no_accumulator():
    frozen = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    assert accumulator_hooks(frozen) == 0
    assert not frozen.requires_grad
    leaf = torch.ones(3, requires_grad=True)
    assert accumulator_hooks(leaf * 2) == 0


def test_a_hook_on_a_meta_parameter_is_counted():
    with torch.device("meta"):
        p = torch.nn.Parameter(torch.ones(4, 2))
    keep = _acc(p)
    keep.register_hook(lambda gi, go: None)
    assert accumulator_hooks(p) == 1


def test_counting_a_dtensor_parameters_hooks_records_nothing_in_the_traced_step():
    """The count runs inside the traced step (before and after ``train_step``); reaching a
    DTensor parameter's node ran a view there that make_fx recorded, at some sizes only
    (regression: ``examples/torch/llama_fsdp_tp.py`` refused, its traces at probe and real sizes
    4 nodes apart)."""
    from torch.distributed.tensor import DTensor, Shard
    from torch.fx.experimental.proxy_tensor import make_fx

    from spec_lang.torch_frontend.world import fake_world

    with fake_world({"dp": 2, "tp": 2}, {"dp": 0, "tp": 0}) as w:
        def step(count: bool):
            def f(x):
                d = DTensor.from_local(x, w.mesh, [Shard(0), Shard(1)], run_check=False)
                p = torch.nn.Parameter(d, requires_grad=True)
                if count:
                    assert accumulator_hooks(p) == 0
                return [x * 2]
            return [str(n.target) for n in make_fx(f, tracing_mode="fake")(
                torch.ones(6, 4)).graph.nodes]
        assert step(True) == step(False)


def test_a_hook_kept_through_freezing_is_counted_and_runs_when_unfrozen():
    """Adversarial finding R23-1: registered, frozen (``parallelize``), unfrozen in the step."""
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    node, calls = _acc(p), []
    node.register_hook(lambda gi, go: calls.append("post"))
    p.requires_grad_(False)
    assert accumulator_hooks(p) == 1 and not p.requires_grad
    with pytest.raises(PlanError, match="hook on its gradient accumulator"):
        refuse_parameter_hooks([("w", p)], "t.py")
    p.requires_grad_(True)
    _backward(p)
    assert calls == ["post"]                  # for real, the hook survived the freeze


def test_tensors_that_cannot_require_grad_have_no_accumulator():
    """Review of R23-1's fix: the count must not crash a right file (an inference-mode or
    integer parameter, frozen)."""
    with torch.inference_mode():
        table = torch.ones(3)
    p = torch.nn.Parameter(table, requires_grad=False)
    assert accumulator_hooks(p) == 0 and not p.requires_grad
    q = torch.nn.Parameter(torch.ones(3, dtype=torch.int64), requires_grad=False)
    assert accumulator_hooks(q) == 0 and not q.requires_grad


def test_a_refused_gradient_hook_names_the_line_it_is_defined_at(tmp_path):
    """Stop 54's new user: a hook registered in ``parallelize`` was refused at line 1. A hook
    defined in the train file names its line; one in a file next to it, that file's line; a
    torch function, line 1 and its module."""
    import functools

    train, near = tmp_path / "train.py", tmp_path / "helpers.py"
    ns: dict = {}
    exec(compile("\n\ndef double(g):\n    return g * 2\n", str(train), "exec"), ns)  # noqa: S102
    exec(compile("def half(g):\n    return g / 2\n", str(near), "exec"), ns)  # noqa: S102
    for hook, site in ((ns["double"], f"{train}:3"), (functools.partial(ns["half"]),
                                                       "helpers.py:1"), (torch.neg, f"{train}:1")):
        p = torch.nn.Parameter(torch.ones(2))
        p.register_hook(hook)
        with pytest.raises(PlanError) as e:
            refuse_parameter_hooks([("w", p)], str(train))
        assert str(e.value).startswith(f"{site}: parameter 'w' has a gradient hook"), e.value
        assert ("from torch" in str(e.value)) == (hook is torch.neg), e.value
