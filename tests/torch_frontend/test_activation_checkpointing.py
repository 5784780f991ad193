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
    before = S._text(enc, {"_abc_impl": S._abc_registry(Base)})
    assert not before.startswith("~")          # readable (was "<opaque _abc._abc_data>")
    Base.register(Other)                       # changes what isinstance answers: seen
    assert S._text(enc, {"_abc_impl": S._abc_registry(Base)}) != before
    assert S._abc_registry(Base)[1] == (Other,)


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
    """R39a-4: an instance of a GenericAlias subclass holds state of its own."""
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
    one = S._text(enc, {"_abc_impl": S._abc_registry(Base)})
    Base._abc_registry_clear()
    Base.register(make(2))
    assert S._text(enc, {"_abc_impl": S._abc_registry(Base)}) != one
