"""Printing and logging the loss in the step (``spec_lang/torch_frontend/log_calls.py``;
R35d-5, R35e-2: exit 3 before). The statements are compiled into a small train file by
``caught.compile_train_file`` and traced with ``make_fx`` on fake tensors, as the capture does;
a formatted symbol whose text could reach anything but the terminal still raises (R35e-1)."""

from __future__ import annotations

import ast
import io
import logging
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.torch_frontend import log_calls as L
from spec_lang.torch_frontend.caught import compile_train_file

SRC = b'''
import io, logging, sys
LOG = logging.getLogger("test_log_calls")
LOG.setLevel(logging.INFO)
LOG.propagate = False
LOG.addHandler(logging.StreamHandler(sys.__stdout__))
BUF = io.StringIO()
KEEP = []
SIDE = []

class Loud:
    def __str__(self):
        SIDE.append("str")
        return "loud"

def f_string(t):
    loss = (t * 2).sum()
    print(f"loss {loss.item():.4f} / {loss.item() / 2:>10.2e}", flush=True)
    return t * 3

def percent(t):
    print("loss %.4f at %d" % ((t * 2).sum().item(), 3), file=sys.__stderr__)
    return t * 3

def logger(t):
    LOG.info("loss %.4f", t.sum().item())
    LOG.warning(f"loss {t.sum().item():.3f}")
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
    yield ns
    logging.getLogger("test_log_calls").handlers.clear()


def _trace(ns: dict, name: str, stdout=None, keep=()):
    """Trace ``name`` with the process's own stdout in place (or ``stdout``) and the logger's
    handlers the file's own (and ``keep``): pytest captures output and adds in-memory log
    handlers while a test runs, which the statements must not be skipped past."""
    log = logging.getLogger("test_log_calls")
    log.handlers = [h for h in log.handlers if type(h) is logging.StreamHandler] + list(keep)
    saved, sys.stdout = sys.stdout, sys.__stdout__ if stdout is None else stdout
    try:
        return make_fx(ns[name], tracing_mode="fake")(torch.randn(3))
    finally:
        sys.stdout = saved


@pytest.mark.parametrize("name", ["f_string", "percent", "logger", "user_str"])
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
                                  "print_shadowed", "user_format"])
def test_a_symbols_text_that_could_be_read_back_still_raises(train_file, name) -> None:
    with pytest.raises(TypeError, match="SymFloat.__format__|symbolic value of the step"):
        _trace(train_file, name)
    assert train_file["KEEP"] == [] and train_file["BUF"].getvalue() == ""


def test_print_to_a_replaced_stdout_is_not_skipped(train_file) -> None:
    with pytest.raises(TypeError, match="symbolic value of the step"):
        _trace(train_file, "f_string", stdout=io.StringIO())


def test_a_logger_with_a_handler_of_the_users_is_not_skipped(train_file) -> None:
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.args)

    # the first call (the symbol an argument) runs as written: the handler gets the symbol; the
    # second's f-string text would reach the handler: it raises, as without the rewrite
    with pytest.raises(TypeError, match="symbolic value of the step"):
        _trace(train_file, "logger", keep=[Keep()])
    assert len(seen) == 1


def test_replaced_logging_internals_are_not_skipped(monkeypatch) -> None:
    log = logging.getLogger("test_log_calls_internals")
    log.propagate = False
    log.handlers = [logging.NullHandler()]
    assert L._plain(log)
    monkeypatch.setattr(logging.Logger, "handle", lambda self, record: None)
    assert not L._plain(log)
    monkeypatch.undo()
    log.handle = lambda record: None
    assert not L._plain(log)


def test_only_the_processs_own_streams_are_outside() -> None:
    assert L._outside(sys.__stdout__) and L._outside(sys.__stderr__)
    assert not L._outside(io.StringIO())
    assert not L._outside(io.TextIOWrapper(io.BytesIO()))
    assert not L._outside(None)


@pytest.mark.parametrize("src,rewritten", [
    ("def f(t):\n    print(f'{t.item():.4f}')\n", True),
    ("def f(t):\n    log.info('%.4f', t.item())\n", True),
    ("def f(t):\n    print('%.4f' % (t.item(),), sep=' ')\n", True),
    ("print(f'{t.item():.4f}')\n", False),                        # not in a function
    ("def f(t):\n    print(g(f'{t.item():.4f}'))\n", False),          # text into a call
    ("def f(t):\n    print(o + f'{t.item():.4f}')\n", False),         # text into a user __add__
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
