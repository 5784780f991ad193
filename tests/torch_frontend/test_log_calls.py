"""Printing the loss in the step (``spec_lang/torch_frontend/log_calls.py``; R35d-5, R35e-2:
exit 3 before; hardened after round 41b). The statements are compiled into a small train file
by ``caught.compile_train_file`` and traced with ``make_fx`` on fake tensors, as the capture
does; a formatted symbol whose text or value could reach anything but the terminal still
raises (R35e-1, R41b-1)."""

from __future__ import annotations

import ast
import io
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.torch_frontend import log_calls as L
from spec_lang.torch_frontend.caught import compile_train_file

SRC = b'''
import io, sys
BUF = io.StringIO()
KEEP = []
SIDE = []

class Loud:
    def __str__(self):
        SIDE.append("str")
        return "loud"

def f_string(t):
    loss = (t * 2).sum()
    print(f"loss {loss.item():.4f} / {loss.detach().item():>10.2e}", flush=True)
    return t * 3

def percent(t):
    print("loss %.4f at %d" % (t.sum().item(), 3), file=sys.__stderr__)
    return t * 3

LABELS = ["a", "b", "c"]

def indexed(t):
    print(LABELS[t.sum().long().item()])
    return t * 3

def lone_surrogate(t):
    print("\\ud800", f"{t.sum().item():.1f}")
    return t * 3

def tensor_text(t):
    loss = t.sum()
    print(loss)
    print(f"{loss}", "loss", loss.item())
    return t * 3

LOUD = Loud()

def user_str(t):
    print(f"{t.sum().item():.1f}", LOUD)
    return t * 3

def assigned(t):
    s = f"{t.sum().item():.0f}"
    return t * 3

def to_a_buffer(t):
    print(f"{t.sum().item():.0f}", file=BUF)
    return t * 3

def stored(t):
    KEEP.append(f"{t.sum().item():.0f}")
    return t * 3

def through_a_call(t):
    print(str(f"{t.sum().item():.0f}"))
    return t * 3

def print_shadowed(t):
    print = KEEP.append
    print(f"{t.sum().item():.0f}")
    return t * 3

def user_format(t):
    print(f"{Fmt(t):x}")
    return t * 3

class Fmt:
    def __init__(self, t):
        self.t = t

    def __format__(self, spec):
        text = f"{self.t.sum().item():.0f}"
        KEEP.append(text)
        return text
'''


@pytest.fixture()
def train_file() -> dict:
    ns: dict = {"__name__": "test_log_calls_train_file"}
    exec(compile_train_file(SRC, "/tmp/test_log_calls_train_file.py"), ns)  # noqa: S102
    return ns


def _trace(ns: dict, name: str, stdout=None):
    """Trace ``name`` with the process's own stdout in place (or ``stdout``): pytest captures
    output while a test runs, which a print must not be skipped past."""
    saved, sys.stdout = sys.stdout, sys.__stdout__ if stdout is None else stdout
    try:
        return make_fx(ns[name], tracing_mode="fake")(torch.randn(3))
    finally:
        sys.stdout = saved


@pytest.mark.parametrize("name", ["f_string", "percent", "user_str", "tensor_text"])
def test_a_printed_or_logged_symbol_is_traced_and_its_text_goes_nowhere(train_file, name
                                                                        ) -> None:
    gm = _trace(train_file, name)
    # the step's own computation is what is traced (t * 3), the .item() reads beside it
    assert any(n.target is torch.ops.aten.mul.Tensor for n in gm.graph.nodes)
    assert train_file["KEEP"] == [] and train_file["BUF"].getvalue() == ""
    assert "__format__" not in vars(torch.SymFloat)        # the placeholders are gone
    if name == "user_str":
        assert train_file["SIDE"] == ["str"]      # print's str() of a user object still runs


@pytest.mark.parametrize("name", ["assigned", "to_a_buffer", "stored", "through_a_call",
                                  "print_shadowed", "user_format", "indexed"])
def test_a_symbols_text_that_could_be_read_back_still_raises(train_file, name) -> None:
    with pytest.raises(Exception, match="SymFloat.__format__|symbolic value of the step|"
                                        "data-dependent"):
        _trace(train_file, name)
    assert train_file["KEEP"] == [] and train_file["BUF"].getvalue() == ""


def test_print_to_a_replaced_stdout_is_not_skipped(train_file) -> None:
    with pytest.raises(TypeError, match="symbolic value of the step"):
        _trace(train_file, "f_string", stdout=io.StringIO())


def test_text_the_real_stream_cannot_encode_raises_as_the_real_print_does(train_file) -> None:
    """R41b-2 (r41b_16): the real print raises UnicodeEncodeError on a lone surrogate; the
    skipped one must too (a try of the train file then records it)."""
    with pytest.raises(UnicodeEncodeError):
        _trace(train_file, "lone_surrogate")


def test_only_the_processs_own_streams_are_outside(monkeypatch) -> None:
    import os

    assert L._outside(sys.__stdout__) and L._outside(sys.__stderr__)
    assert not L._outside(io.StringIO())
    assert not L._outside(io.TextIOWrapper(io.BytesIO()))
    assert not L._outside(None)
    r, w = os.pipe()                       # R41b-6: sys.__stdout__ rebound to a pipe read back
    try:
        pipe = io.TextIOWrapper(io.FileIO(w, "w", closefd=False))
        monkeypatch.setattr(sys, "__stdout__", pipe)
        assert not L._outside(sys.__stdout__)
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("src,rewritten", [
    ("def f(t):\n    print(f'{t.item():.4f}')\n", True),
    ("def f(t):\n    log.info('%.4f', t.item())\n", False),       # logging: not handled
    ("def f(t):\n    print('%.4f' % (t.item(),), sep=' ')\n", True),
    ("print(f'{t.item():.4f}')\n", False),                        # not in a function
    ("def f(t):\n    print(g(f'{t.item():.4f}'))\n", False),          # text into a call
    ("def f(t):\n    print(o + f'{t.item():.4f}')\n", False),         # text into a user __add__
    ("def f(t):\n    print(f'{t.item() / (t.item() - 2):.3f}')\n", False),   # R41b-4
    ("def f(t):\n    print(d[(f'{t.item():.0f}',)])\n", False),      # R41b-1: a tuple key
    ("def f(t):\n    print(inspect.currentframe())\n", False),        # a frame read
    ("def f(t):\n    print(d['loss'], t.detach().mean().item())\n", True),
    ("def f(t):\n    print(f'{o:{t.item():.1f}}')\n", False),         # text as a format spec
    ("def f(t):\n    print(d[f'{t.item():.1f}'])\n", False),          # text as a key
    ("def f(t):\n    print(x := f'{t.item():.1f}')\n", False),        # text kept in a name
    ("def f(t):\n    print(**kw)\n", False),
    ("def f(t):\n    emit(f'{t.item():.1f}')\n", False),              # not named as a log call
    ("class C:\n    print(f'{t.item():.4f}')\n", False),
])
def test_which_statements_are_rewritten(src, rewritten) -> None:
    tree = L.LogCalls().visit(ast.parse(src))
    marks = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == L.MARK]
    assert bool(marks) is rewritten
