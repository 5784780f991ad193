"""``styles.styled_module``: a capture that fails inside a module the user's ``parallelize``
gave a parallel style names that module, the style and the style's line (stop 54's new user:
the error named only the model's line)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from spec_lang.torch_frontend.styles import styled_module  # noqa: E402


class _Boom(nn.Module):
    def forward(self, x):
        raise ValueError("module inputs and input_layouts should have same length!")


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(2, 2)
        self.ff = nn.Sequential(_Boom())

    def forward(self, x):
        return self.ff(self.w1(x))


def _error(model: nn.Module) -> BaseException:
    try:
        model(torch.ones(1, 2))
    except ValueError as e:
        return e
    raise AssertionError("no error")


def test_the_innermost_styled_module_on_the_traceback_is_named():
    model = nn.ModuleDict({"layers": nn.ModuleList([_Block(), _Block()])})
    model.forward = lambda x: model["layers"][1](x)     # noqa: E731 -- the second block fails
    e = _error(model)
    styles = {"layers.1": ("PrepareModuleInput()", "par.py:9"),
              "layers.1.ff": ("SequenceParallel()", "par.py:12"),
              "layers.0.ff": ("ColwiseParallel()", "par.py:3"),
              "layers.1.w1": ("ColwiseParallel()", "par.py:11")}
    assert styled_module(e, model, styles) == "layers.1.ff, parallelised by SequenceParallel() " \
                                              "at par.py:12"
    del styles["layers.1.ff"]            # the block's own style when its child has none
    assert styled_module(e, model, styles) == "layers.1, parallelised by PrepareModuleInput() " \
                                              "at par.py:9"
    assert styled_module(e, model, {"layers.0.ff": ("ColwiseParallel()", "par.py:3")}) == ""
    root = _Block()                      # a style on the root module itself (name "")
    assert styled_module(_error(root), root, {"": ("fully_shard", "par.py:1")}) == \
        "the model, parallelised by fully_shard at par.py:1"
