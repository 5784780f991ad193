"""Adversarial round 55d (``tests/adversarial/ATTEMPTS.md``, "Round 55d"): d05ef1f (a held fake
tensor's own keys read, R55c-7; a torch Future by ``done()`` / ``value()``, R55c-3; the capture
guards skipped only while they hold what they were made with, R55c-5; a storage's text with its
Python object's id, R55c-4).

Plans in ``plans/round55d/``; the truth is ``python tests/adversarial/torch4_truth.py FILE 2``.
The fast tests call ``step_state`` / ``_Encoder`` / ``process_state`` directly; the slow ones
prove the plans.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

ROUND = Path(__file__).resolve().parent / "plans" / "round55d"
ROUND55C = Path(__file__).resolve().parent / "plans" / "round55c"
KEY = "parameter weight attributes"


def _enc(v) -> str:
    from spec_lang.torch_frontend.step_state import _Encoder

    return _Encoder({}, frozenset()).enc({"C": v})


def _param_texts(setup, change) -> tuple[str, str]:
    """``step_state``'s entry for a weight's attributes before and after ``change(weight)``."""
    from spec_lang.torch_frontend.step_state import step_state

    model = torch.nn.Linear(2, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    setup(model.weight)
    base = {id(model.weight): dict(vars(model.weight))}
    before = step_state(model, opt, [], base_keys=base)[KEY]
    change(model.weight)
    return before, step_state(model, opt, [], base_keys=base)[KEY]


# -- R55d-2: torch objects whose user state is not in public plain attributes ------------------

class _Count(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        return x


@pytest.mark.xfail(strict=True, reason="R55d-2 open: a ScriptModule's attributes live in C++")
def test_r55d_2_script_module_attribute():
    """A scripted module's int attribute is in its ``torch._C.ScriptModule``: the text is the
    type name only (r55d_01)."""
    sm = torch.jit.script(_Count())
    before = _enc(sm)
    sm.n = sm.n + 1
    assert sm.n == 1
    assert _enc(sm) != before


@pytest.mark.xfail(strict=True, reason="R55d-2 open: a held tensor's grad_fn is not read")
def test_r55d_2_held_tensor_grad_fn_metadata():
    """A held non-leaf tensor's ``grad_fn.metadata`` dict (r55d_02)."""
    t = torch.ones(1, requires_grad=True) * 2
    before = _enc(t)
    t.grad_fn.metadata["n"] = 1
    assert _enc(t) != before


@pytest.mark.xfail(strict=True, reason="R55d-2 open: a DataLoader iterator's position unread")
def test_r55d_2_dataloader_iterator_position():
    """``next`` on a held ``DataLoader`` iterator (r55d_03): its position is private."""
    it = iter(torch.utils.data.DataLoader(list(range(10)), batch_size=None))
    before = _enc(it)
    assert next(it) == 0
    assert _enc(it) != before


@pytest.mark.xfail(strict=True, reason="R55d-2 open: a torch Python object's private attribute")
def test_r55d_2_distribution_private_attribute():
    """A private attribute the file sets on a ``torch.distributions`` object (r55d_04)."""
    d = torch.distributions.Normal(0.0, 1.0)
    d._steps = 0
    before = _enc(d)
    d._steps = 1
    assert _enc(d) != before


@pytest.mark.xfail(strict=True, reason="R55d-2 open: a pending Future's callbacks unread")
def test_r55d_2_pending_future_callback():
    """A callback added to a pending Future runs when it completes: state the text misses."""
    fut = torch.futures.Future()
    before = _enc(fut)
    fut.add_done_callback(lambda f: None)
    assert _enc(fut) != before


def test_r55d_2_control_future_value():
    """Control (d05ef1f, R55c-3's fix): a completed Future's value is read."""
    fut = torch.futures.Future()
    fut.set_result([0])
    before = _enc(fut)
    fut.value()[0] += 1
    assert _enc(fut) != before


# -- R55d-3: the capture guard, what ``_same`` does not record ---------------------------------

def _mode_with_guard(w) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    from spec_lang.torch_frontend.own_guards import capture_own

    def guard(*a, **k):
        return None

    fm = FakeTensorMode()
    fm.dispatch = capture_own(guard)
    w.fake_mode = fm


@pytest.mark.state_modules()
def test_r55d_3_doc_of_the_capture_guard():
    """``__doc__`` (like ``__module__``, ``__qualname__``) is neither in ``vars(f)`` nor in
    ``_made_with``: a counter there is unseen (r55d_05)."""
    before, after = _param_texts(
        _mode_with_guard, lambda w: setattr(w.fake_mode.dispatch, "__doc__", "1"))
    assert after != before


@pytest.mark.state_modules()
def test_r55d_3_module_of_the_capture_guard():
    before, after = _param_texts(
        _mode_with_guard, lambda w: setattr(w.fake_mode.dispatch, "__module__", 1))
    assert after != before


@pytest.mark.state_modules()
def test_r55d_3_control_kwdefaults_of_the_capture_guard():
    """Control (d05ef1f, R55c-5's unit): ``__kwdefaults__`` set makes the guard read."""
    before, after = _param_texts(
        _mode_with_guard,
        lambda w: setattr(w.fake_mode.dispatch, "__kwdefaults__", {"steps_seen": 1}))
    assert after != before


class _Box:
    def __init__(self, n):
        self.n = n


def test_r55d_3_closure_cell_replaced_at_the_same_address():
    """R55d-3: ``_same`` kept ids of the objects the closure cells hold, not the objects: one
    freed and another made at its address (CPython reuses it) passed as the one made."""
    from spec_lang.torch_frontend.own_guards import CAPTURE_OWN, _same, capture_own

    box = _Box(0)

    def guard(*a, **k):
        return box

    capture_own(guard)
    cell = guard.__closure__[0]
    old = id(cell.cell_contents)
    del box                          # clears the cell: the _Box is freed
    cell.cell_contents = _Box(1)     # CPython's allocator gives it the freed address
    # (capture_own keeps the objects the cells held: the address is not reused, and the new
    # object is not the recorded one)
    assert id(cell.cell_contents) != old and not _same(CAPTURE_OWN[guard], guard)


# -- R55d-4: false UNKNOWN, a held fake tensor's memo filled by the step -----------------------

@pytest.mark.xfail(strict=True, reason="R55d-4 open: a fake memo filled by nonzero changes text")
def test_r55d_4_held_fake_tensor_nonzero_memo():
    """d05ef1f reads all of a held fake tensor's keys: ``nonzero`` under a mode with a shape
    env fills ``_nonzero_memo``; the text changes (a held tensor changed: UNKNOWN)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        c = torch.ones(4)
    before = _enc(c)
    with fm:
        c.nonzero()
    assert c._nonzero_memo is not None                                  # noqa: SLF001
    assert _enc(c) == before


# -- slow: the plans ----------------------------------------------------------------------------

def _prove(path: Path) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(path), "--jobs", "1", "--no-check"])


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R55d-2 open")
def test_r55d_01_script_module_counter_not_equivalent():
    assert _prove(ROUND / "r55d_01_counter_in_script_module_attr_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R55d-2 open")
def test_r55d_02_grad_fn_metadata_counter_not_equivalent():
    assert _prove(ROUND / "r55d_02_counter_in_held_grad_fn_metadata_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R55d-2 open")
def test_r55d_03_dataloader_iterator_counter_not_equivalent():
    assert _prove(ROUND / "r55d_03_counter_in_dataloader_iterator_wrong.py") != 0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="R55d-2 open")
def test_r55d_04_distribution_private_counter_not_equivalent():
    assert _prove(ROUND / "r55d_04_counter_in_distribution_private_attr_wrong.py") != 0


@pytest.mark.slow
def test_r55d_05_guard_doc_counter_not_equivalent():
    """R55d-1, R55d-3 fixed: refused, exit 3 (28.3 s)."""
    assert _prove(ROUND / "r55d_05_capture_dispatch_doc_wrong.py") == 3
