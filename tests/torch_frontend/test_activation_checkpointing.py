"""Activation checkpointing in ``parallelize`` (torch's ``checkpoint_wrapper`` /
``apply_activation_checkpointing``, what torchtitan's ``apply_ac`` calls): the plan's names as
the wrapper's ``state_dict`` gives them (``wrapper_names``), the wrapper's state read by
``step_state`` (``abc.ABC``'s registry, a ``dict[str, Any]`` annotation, torch's
``__dynamo_disable`` cache). Round 38e, ``r38e_10``: an internal error (UNKNOWN) before.

Unit tests run in seconds; the end-to-end proves are ``slow`` (about 50 s each).
"""

from __future__ import annotations

import abc
import dataclasses
import types
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, checkpoint_wrapper)

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.abc_registry import abc_registry
from spec_lang.torch_frontend import step_state as S
from spec_lang.torch_frontend.capture import InputRole, OutputRole, Trace
from spec_lang.torch_frontend.wrapper_names import state_dict_name, state_dict_names

RIGHT = (Path(__file__).resolve().parents[1] / "adversarial" / "plans" / "round38e"
         / "r38e_10_dp_activation_checkpointing_check_fn_lambda_right.py")
W = "inner._checkpoint_wrapped_module."


def _trace(**kw) -> Trace:
    base = dict(gm=None, inputs=[InputRole("param", W + "w1.weight", ("R",), "torch.float32",
                                           (10, 6)),
                                 InputRole("state", "momentum_buffer:" + W + "w1.weight",
                                           ("R",), "torch.float32", (10, 6))],
                outputs=[OutputRole("grad", "grad:" + W + "w1.weight", ("R",),
                                    W + "w1.weight")],
                mesh={"dp": 2}, coords={"dp": 0}, groups={}, sizes={},
                after={"inner.training": "True", W[:-1] + ".training": "True",
                       "param_groups[0].params": f"[{W}w1.weight]"})
    base.update(kw)
    return Trace(**base)


def test_state_dict_name_removes_every_wrapper_segment_as_torch_does() -> None:
    assert state_dict_name("layers.0._checkpoint_wrapped_module.attention.wq.weight") == \
        "layers.0.attention.wq.weight"
    assert state_dict_name("_checkpoint_wrapped_module.a._checkpoint_wrapped_module.b") == "a.b"
    assert state_dict_name("grad:x._checkpoint_wrapped_module.w") == "grad:x.w"
    assert state_dict_name("layers.0.attention.wq.weight") == "layers.0.attention.wq.weight"


def test_a_trace_is_named_as_the_state_dict_names_it() -> None:
    tr = state_dict_names(_trace(), "t.py")
    assert [r.name for r in tr.inputs] == ["inner.w1.weight", "momentum_buffer:inner.w1.weight"]
    assert [(o.name, o.param) for o in tr.outputs] == [("grad:inner.w1.weight",
                                                        "inner.w1.weight")]
    # the wrapper's and the block's training flags agree: one entry
    assert tr.after == {"inner.training": "True", "param_groups[0].params": "[inner.w1.weight]"}


def test_a_trace_without_the_wrapper_is_returned_as_it_is() -> None:
    tr = _trace(inputs=[], outputs=[], after={"a.training": "True"})
    assert state_dict_names(tr, "t.py") is tr


def test_two_parameters_named_alike_once_unwrapped_are_refused() -> None:
    two = [InputRole("param", W + "w", ("R",), "torch.float32", (2,)),
           InputRole("param", "inner.w", ("R",), "torch.float32", (2,))]
    with pytest.raises(PlanError, match=r"^t\.py:1: the input names .* are both 'inner\.w'"):
        state_dict_names(_trace(inputs=two), "t.py")


def test_the_wrapper_and_its_block_leaving_two_values_are_refused() -> None:
    after = {"inner.training": "True", W[:-1] + ".training": "False"}
    with pytest.raises(PlanError, match=r"^t\.py:1: inner\.training leaves the step as True"):
        state_dict_names(_trace(after=after), "t.py")


def test_an_abc_is_read_by_its_registry() -> None:
    class Base(abc.ABC):
        pass

    class Other:
        pass

    enc = S._Encoder({}, frozenset())
    before = S._text(enc, {"_abc_impl": abc_registry(Base)})
    assert not before.startswith("~")          # readable (was "<opaque _abc._abc_data>")
    Base.register(Other)                       # changes what isinstance answers: seen
    assert S._text(enc, {"_abc_impl": abc_registry(Base)}) != before
    assert abc_registry(Base)[1] == ((Other, f"@{id(Other):x}"),)


def test_a_generic_alias_is_read_by_origin_and_arguments() -> None:
    enc = S._Encoder({}, frozenset())
    assert S._text(enc, dict[str, int]) == "alias:class:builtins.dict[class:builtins.str," \
                                            "class:builtins.int]"
    assert S._text(enc, dict[str, int]) != S._text(enc, dict[str, float])
    assert S._text(enc, tuple[float]) != S._text(enc, next(iter(tuple[float])))   # R39c-2


def test_the_wrappers_checkpoint_function_reads_alike_after_its_first_call() -> None:
    from spec_lang.torch_frontend.op_guard import current_baseline

    current_baseline()
    m = checkpoint_wrapper(nn.Linear(2, 2), checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    enc = S._Encoder({}, frozenset())
    fn = vars(m)["checkpoint_fn"]
    before = S._text(enc, fn)
    m(torch.randn(3, 2, requires_grad=True)).sum().backward()   # torch caches its disable
    assert S._text(enc, fn) == before


def test_a_dynamo_disable_cache_that_is_not_torchs_is_read() -> None:
    def f() -> None:
        pass

    def other() -> None:
        pass

    assert S._dynamo_cache(f) == frozenset()
    f.__dynamo_disable = other                            # the train file's: read
    assert S._dynamo_cache(f) == frozenset()
    # a forged ``_fn`` in the right module name, closing over f: not torch's code
    fake = types.FunctionType((lambda: f).__code__.replace(co_name="_fn"),
                              {"__name__": "torch._dynamo.eval_frame"}, "_fn", None,
                              (types.CellType(f),))
    f.__dynamo_disable = fake
    assert S._dynamo_cache(f) == frozenset()


def test_roles_are_frozen_dataclasses() -> None:
    # state_dict_names replaces them (dataclasses.replace), never mutates a trace's roles
    assert dataclasses.is_dataclass(InputRole) and InputRole.__dataclass_params__.frozen


# -- end to end (slow) ----------------------------------------------------------------------------

def _prove(path: Path, tmp_path: Path) -> dict:
    from tests.adversarial.torch_prove import prove

    return prove(path, tmp_path)


@pytest.mark.slow
def test_activation_checkpointing_in_parallelize_is_equivalent(tmp_path) -> None:
    """UNKNOWN (internal DimsError, exit 2) before; EQUIVALENT (4 goals, ~50 s)."""
    out = _prove(RIGHT, tmp_path)
    assert out["_rc"] == 0 and out["verdict"] == "EQUIVALENT", out


@pytest.mark.slow
@pytest.mark.parametrize("old,new", [
    ("/ ws\n", "\n"),                                        # a sum of the dp gradients
    ("for p in model.parameters():", "for p in list(model.parameters())[:1]:"),  # one skipped
])
def test_activation_checkpointing_mutants_are_refuted(tmp_path, old, new) -> None:
    src = RIGHT.read_text()
    assert old in src
    path = tmp_path / "ac_mutant.py"
    path.write_text(src.replace(old, new, 1))
    out = _prove(path, tmp_path)
    assert out["_rc"] == 1 and out["verdict"] == "NOT EQUIVALENT", out


# -- parallelize keeps every module and parameter at its name (R39a-1) -----------------------------

class _Two(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 2)


def test_wrapping_and_sharding_in_place_keep_the_names() -> None:
    from spec_lang.torch_frontend.wrapper_names import built_names, check_names_kept

    m = _Two()
    where = built_names(m)
    m.a = checkpoint_wrapper(m.a, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    m.b.weight = nn.Parameter(torch.zeros(2, 2))       # a new object (as TP / FSDP2 make)
    check_names_kept(where, m, "t.py")


@pytest.mark.parametrize("move", ["swap_modules", "swap_params", "fake_wrapper"])
def test_a_module_or_parameter_moved_by_parallelize_is_refused(move) -> None:
    from spec_lang.torch_frontend.wrapper_names import built_names, check_names_kept

    m = _Two()
    where = built_names(m)
    if move == "swap_modules":
        m.a, m.b = m.b, m.a
    elif move == "swap_params":
        m.a.weight, m.b.weight = m.b.weight, m.a.weight
    else:                      # a module of the user's named like torch's wrapper child
        holder = nn.Module()
        holder._checkpoint_wrapped_module = m.b
        m.a = holder
    with pytest.raises(PlanError, match=r"^t\.py:1: parallelize moved '(a|b)[.a-z]*'"):
        check_names_kept(where, m, "t.py")


def test_a_generic_alias_subclass_is_read_with_its_state() -> None:
    """R39a-4: an instance of a GenericAlias subclass holds state of its own: not read as an
    alias; unreadable, so always reported (its origin and arguments are in C: R57c-3)."""
    class Box(types.GenericAlias):
        pass

    enc = S._Encoder({}, frozenset())
    b = Box(dict, (str, int))
    b.scale = 0.5
    assert S._text(enc, b).startswith(S.UNREADABLE)   # not read as an alias: always reported


def test_a_dynamo_disable_context_with_a_callback_is_read() -> None:
    """R39a-3: torch's DisableContext._fn over the function, with a callback that compiles
    it at every call, is not torch's cache."""
    import torch._dynamo.eval_frame as ef
    from spec_lang.torch_frontend.op_guard import current_baseline

    current_baseline()

    def f() -> None:
        pass

    ctx = ef.DisableContext()
    f.__dynamo_disable = ctx(f)
    assert S._dynamo_cache(f) == frozenset({"__dynamo_disable"})    # torch's own form
    ctx.callback = lambda *a: None
    assert S._dynamo_cache(f) == frozenset()


def test_abc_registry_classes_are_read_by_their_code() -> None:
    """r39a_10: a registered class swapped for another of the same module and name."""
    class Base(abc.ABC):
        pass

    def make(k):
        class Reg:
            def f(self):
                return k
        return Reg

    Base.register(make(1))
    enc = S._Encoder({}, frozenset())
    one = S._text(enc, {"_abc_impl": abc_registry(Base)})
    Base._abc_registry_clear()
    Base.register(make(2))
    assert S._text(enc, {"_abc_impl": abc_registry(Base)}) != one


def test_abc_registry_classes_are_read_by_identity_too() -> None:
    """r39a_10: the registered class swapped for another of the same module, name and code
    (instances of the first are no longer instances of the ABC)."""
    class Base(abc.ABC):
        pass

    def make():
        class Reg:
            pass
        return Reg

    first, second = make(), make()
    Base.register(first)
    enc = S._Encoder({}, frozenset())
    one = S._text(enc, {"_abc_impl": abc_registry(Base)})
    assert S._text(enc, {"_abc_impl": abc_registry(Base)}) == one   # unchanged: alike
    Base._abc_registry_clear()
    Base.register(second)
    assert S._text(enc, {"_abc_impl": abc_registry(Base)}) != one


def test_an_abc_reached_as_a_class_is_read_by_its_registry() -> None:
    """R39a-6: a model class deriving from an abstract base, reached through a method's
    ``super()`` cell (the encoder's class case), was unreadable (the C ``_abc_impl``)."""
    class Model(nn.Module, abc.ABC):
        @abc.abstractmethod
        def init_weights(self):
            ...

    class MLP(Model):
        def __init__(self):
            super().__init__()

        def init_weights(self):
            pass

    enc = S._Encoder({}, frozenset())
    got = S._text(enc, MLP)
    assert not got.startswith(S.UNREADABLE), got       # (methods: compared as changed or not)
    MLP.register(float)        # (its bases are read as the module's class chain, step_state)
    assert S._text(enc, MLP) != got


# -- activation checkpointing under FSDP2 / replicate: the recomputation's parameters (R39a-2) ---

class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(3, 4, bias=False, dtype=torch.float64)
        self.w2 = nn.Linear(4, 3, bias=False, dtype=torch.float64)

    def forward(self, x):
        return self.w2(torch.tanh(self.w1(x)))


def _unit_with_wrapped_block(monkeypatch, impl):
    """A unit over a checkpoint-wrapped block, its gathered view replaced by ``stored * 1`` (a
    tensor that is not the stored parameter), every view made recorded with whether the
    autograd engine was running."""
    from spec_lang.torch_frontend import dataparallel as dp

    torch.manual_seed(0)
    block = _Block()
    wrapper = checkpoint_wrapper(block, checkpoint_impl=impl)
    made: list[bool] = []

    def view(u, stored, orig):  # noqa: ARG001
        made.append(torch._C._current_graph_task_id() != -1)  # noqa: SLF001
        return stored * 1.0

    monkeypatch.setattr(dp, "unit_view", view)
    # a unit that reshards after its forward (S42-1: the root left None keeps its views)
    u = types.SimpleNamespace(kind="fsdp", fsdp_state=True, module=wrapper,
                              settings={"reshard_after_forward": True})
    new = {"w1.weight": block.w1.weight, "w2.weight": block.w2.weight}
    owner = {"w1.weight": (u, [(block.w1, "weight")]), "w2.weight": (u, [(block.w2, "weight")])}
    hooks = dp.install_units([u], owner, new, dict(new))
    return block, wrapper, new, made, hooks


@pytest.mark.parametrize("impl", [CheckpointImpl.NO_REENTRANT, CheckpointImpl.REENTRANT])
def test_a_checkpointed_block_recomputes_with_the_units_parameters_in_the_backward(
        monkeypatch, impl) -> None:
    block, wrapper, new, made, hooks = _unit_with_wrapped_block(monkeypatch, impl)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    wrapper(x).pow(2).sum().backward()
    # the unit's forward (outside the backward), then the recomputation (inside it): one view
    # per parameter each time
    assert made == [False, False, True, True]
    # the block holds the stored parameters again, though torch stops a non-reentrant
    # recomputation early (by raising inside the block's forward)
    assert block.w1.weight is new["w1.weight"] and block.w2.weight is new["w2.weight"]
    want = torch.autograd.grad(_Block.forward(block, x.detach()).pow(2).sum(),
                               [block.w1.weight, block.w2.weight])
    for p, g in zip(new.values(), want):
        assert torch.allclose(p.grad, g, rtol=0, atol=1e-12)
    for h in hooks:
        h.remove()


def test_a_checkpointed_block_called_outside_the_unit_and_the_backward_keeps_the_stored(
        monkeypatch) -> None:
    block, wrapper, new, made, hooks = _unit_with_wrapped_block(monkeypatch,
                                                                CheckpointImpl.NO_REENTRANT)
    block(torch.randn(5, 3, dtype=torch.float64))
    assert made == []
    assert block.w1.weight is new["w1.weight"]
    for h in hooks:
        h.remove()


def _unit(monkeypatch, module, holders):
    from spec_lang.torch_frontend import dataparallel as dp

    made: list[bool] = []

    def view(u, stored, orig):  # noqa: ARG001
        made.append(torch._C._current_graph_task_id() != -1)  # noqa: SLF001
        return stored * 1.0

    monkeypatch.setattr(dp, "unit_view", view)
    u = types.SimpleNamespace(kind="fsdp", fsdp_state=True, module=module,   # resharding (S42-1)
                              settings={"reshard_after_forward": True})
    new = {n: getattr(m, a) for n, (m, a) in holders.items()}
    owner = {n: (u, [h]) for n, h in holders.items()}
    return made, dp.install_units([u], owner, new, dict(new))


def test_checkpoint_called_in_a_units_forward_recomputes_with_the_units_parameters(
        monkeypatch) -> None:
    """R40a-3: ``checkpoint(self.block, x)`` in the unit's ``forward`` (no wrapper class)."""
    from torch.utils.checkpoint import checkpoint

    class Unit(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = _Block()

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False)

    torch.manual_seed(0)
    unit = Unit()
    made, hooks = _unit(monkeypatch, unit, {"w1": (unit.block.w1, "weight"),
                                            "w2": (unit.block.w2, "weight")})
    unit(torch.randn(5, 3, dtype=torch.float64, requires_grad=True)).sum().backward()
    assert made == [False, False, True, True]
    for h in hooks:
        h.remove()


def test_a_block_run_in_the_backward_by_anything_but_torchs_recomputation_makes_no_view(
        monkeypatch) -> None:
    """R40a-4: a custom ``autograd.Function`` whose backward runs the block makes no view (no
    recomputation). Inside the unit's backward (its pre-backward reached, its post-backward
    not) the block sees the views the unit's forward made, registered again as FSDP2's
    unsharded parameters (round 44b, R44b-1; before: the stored ones)."""
    torch.manual_seed(0)
    block = _Block()
    seen: list[bool] = []

    class Unit(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = block

        def forward(self, x):
            return Twice.apply(x)

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            block(torch.zeros(1, 3, dtype=torch.float64))
            seen.append(block.w1.weight is stored["w1"])
            return g * 2

    unit = Unit()
    made, hooks = _unit(monkeypatch, unit, {"w1": (block.w1, "weight"),
                                            "w2": (block.w2, "weight")})
    stored = {"w1": block.w1.weight}
    unit(torch.randn(5, 3, dtype=torch.float64, requires_grad=True)).sum().backward()
    assert made == [False, False] and seen == [False]    # the unit's forward only
    for h in hooks:
        h.remove()


def test_torchs_two_recomputation_functions_are_found() -> None:
    from spec_lang.torch_frontend.recompute import _recompute_codes

    names = sorted(c.co_name for c in _recompute_codes().values())
    assert names == ["backward", "recompute_fn"]


AC_PLANS = Path(__file__).resolve().parent / "ac_plans"


@pytest.mark.slow
@pytest.mark.parametrize("name,rc,verdict", [
    # truths (tests/adversarial/torch4_truth.py, 2 steps, real gloo FSDP2): 5.6e-17, 5.6e-17,
    # 1.4e-17, 1.4e-17 (right); the divide factor 1: 0.0086 / 0.012 (wrong)
    ("ac_fsdp_block_and_root_right.py", 0, "EQUIVALENT"),      # exit 3 before (R39a-2)
    ("ac_fsdp_root_only_right.py", 0, "EQUIVALENT"),
    ("ac_reentrant_fsdp_right.py", 0, "EQUIVALENT"),
    ("ac_reentrant_replicate_right.py", 0, "EQUIVALENT"),     # NOT EQUIVALENT before: wrong
    ("ac_fsdp_divide_factor_one_buggy.py", 1, "NOT EQUIVALENT"),
    # R39a-5's guard: the wrapper's own flag cleared in the step (truth step 2 0.011 / 0.014)
    ("ac_wrapper_flag_cleared_in_step_wrong.py", 2, "UNKNOWN"),
])
def test_activation_checkpointing_under_data_parallel_end_to_end(tmp_path, name, rc,
                                                                 verdict) -> None:
    out = _prove(AC_PLANS / name, tmp_path)
    assert out["_rc"] == rc and out.get("verdict") == verdict, out
    if rc == 1:
        cx = out["counterexample"]
        assert (cx["goal"], cx["ratio"], cx["rank"]) == ("grad:inner.w2.weight", "2", {"dp": 0})
        assert "divide factor 1 set at" in cx["placement"], cx


@pytest.mark.slow
def test_a_block_run_outside_the_units_forward_and_the_backward_is_proved(tmp_path) -> None:
    """Truth: right (1.7e-18; FSDP2 left the block gathered, ``reshard_after_forward=False``).
    Exit 3 before S42-1's fix (a false refusal: the stored DTensor registered after the unit's
    forward, "mixed torch.Tensor and DTensor"); since ``fsdp_hold`` the unit's views stay
    registered after its forward, as FSDP2's unsharded parameters: EQUIVALENT (4 goals, 24 s).
    (The file keeps its old name.)"""
    out = _prove(AC_PLANS / "ac_fsdp_direct_call_outside_forward_refused.py", tmp_path)
    assert out["_rc"] == 0 and out.get("verdict") == "EQUIVALENT", out


# -- a torch function's own attributes in the process state (R39a-3) -------------------------------

def test_a_torch_functions_foreign_dynamo_disable_is_read_as_the_users() -> None:
    """r39a_11 / r40a_01: the step put a compiling ``DisableContext`` (or a partial) on
    ``torch.utils.checkpoint.checkpoint.__wrapped__``; the module globals read functions by
    code only, so such a function counts as the user's (its namespace then uncomparable)."""
    import functools

    import torch._dynamo.eval_frame as ef
    import torch.utils.checkpoint as ckpt
    from spec_lang.torch_frontend import process_state as P
    from spec_lang.torch_frontend.op_guard import current_baseline

    current_baseline()
    who = P._User((), ())
    m = nn.Linear(2, 2)
    ckpt.checkpoint(m, torch.randn(3, 2, requires_grad=True), use_reentrant=False).sum().backward()
    inner = ckpt.checkpoint.__wrapped__
    saved = vars(inner)["__dynamo_disable"]                  # torch's own cache: not the user's
    try:
        assert not P._from_user(ckpt.checkpoint, who)
        ctx = ef.DisableContext()
        ctx.callback = lambda *a: None                       # a callback that compiles
        inner.__dynamo_disable = ctx(inner)
        assert P._from_user(ckpt.checkpoint, who)
        inner.__dynamo_disable = functools.partial(inner)    # R40a-1
        assert P._from_user(ckpt.checkpoint, who)
    finally:
        inner.__dynamo_disable = saved
    assert not P._from_user(ckpt.checkpoint, who)


# -- torch's wrapper's own training flag (R39a-5) --------------------------------------------------

@pytest.mark.state_modules()
def test_torchs_wrapper_flag_is_compared_as_a_change_and_its_blocks_as_left() -> None:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    from spec_lang.torch_frontend import dataparallel as dp
    from spec_lang.torch_frontend.leftover import scalar_state
    from spec_lang.torch_frontend.wrapper_names import is_checkpoint_wrapper

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = _Block().eval()                 # a block in eval mode, then wrapped

    model = Outer()
    model.inner = checkpoint_wrapper(model.inner)
    assert model.inner.training and not model.inner._checkpoint_wrapped_module.training
    assert is_checkpoint_wrapper(model.inner)
    assert not is_checkpoint_wrapper(type("Mine", (CheckpointWrapper,), {})(_Block()))
    dp._as_fsdp_module(model.inner)                      # fully_shard's FSDP<cls>: still it
    assert is_checkpoint_wrapper(model.inner)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    left = scalar_state(model, opt)
    assert "inner.training" not in left                  # the wrapper's: not compared as left
    assert left["inner._checkpoint_wrapped_module.training"] == "False"
    before = S.step_state(model, opt, [])
    key = "module inner.training (torch's checkpoint wrapper)"
    assert before[key] == "True"
    model.inner.training = False                         # the wrapper's own flag, in a step
    assert S.state_changes(before, S.step_state(model, opt, [])) == {key: "False"}


def test_a_wrapper_at_the_root_has_its_blocks_flag_named_as_the_model() -> None:
    """R40b-1: ``checkpoint_wrapper(model)`` returned by ``parallelize``: its block's flag is
    the single-device model's ``<model>.training``."""
    from spec_lang.torch_frontend.leftover import scalar_state
    from spec_lang.torch_frontend.wrapper_names import state_dict_name

    root = checkpoint_wrapper(_Block())
    left = scalar_state(root, torch.optim.SGD(root.parameters(), lr=0.1))
    assert "<model>.training" not in left                # the wrapper's own: a change only
    assert state_dict_name("<model>._checkpoint_wrapped_module.training") == "<model>.training"
    assert left["<model>._checkpoint_wrapped_module.training"] == "True"


USER = frozenset({__name__})        # this file as the user's module


def test_an_abcs_subclasses_and_a_hooks_caches_are_read() -> None:
    """R40b-4: a registry of a subclass; R40a-2 / R40b-3: the caches, with a hook of the user's
    only (without one a cache fills alike on both sides)."""
    class Model(abc.ABC):
        pass

    enc = S._Encoder({}, frozenset(), USER)
    before = S._text(enc, {"_abc_impl": abc_registry(Model, USER)})
    isinstance(Model(), Model)                             # fills the positive cache
    isinstance(1.5, Model)                                 # fills the negative cache: no hook
    assert S._text(enc, {"_abc_impl": abc_registry(Model, USER)}) == before

    class Sub(Model):
        pass

    with_sub = S._text(enc, {"_abc_impl": abc_registry(Model, USER)})
    assert with_sub != before                              # a new subclass
    Sub.register(float)                                    # isinstance(1.5, Model) now True
    assert S._text(enc, {"_abc_impl": abc_registry(Model, USER)}) != with_sub

    flag = [False]

    class Hooked(abc.ABC):
        @classmethod
        def __subclasshook__(cls, c):
            return flag[0] or NotImplemented

    clean = S._text(enc, {"_abc_impl": abc_registry(Hooked, USER)})
    flag[0] = True
    assert isinstance(1.5, Hooked)                         # cached while the flag is up
    flag[0] = False
    assert S._text(enc, {"_abc_impl": abc_registry(Hooked, USER)}) != clean


def test_another_packages_abc_is_read_by_its_registry_only() -> None:
    """A library's ABC (not the user's): its subclasses and caches are not read (a library's
    ``Protocol`` has thousands of subclasses; reading them made the 8B capture 11 CPU s
    slower)."""
    class Model(abc.ABC):
        pass

    class Sub(Model):
        pass

    assert len(abc_registry(Model)) == 2                 # ("<abc registry>", registry)
    assert len(abc_registry(Model, USER)) == 3           # + the subclasses

