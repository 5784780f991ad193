"""Deep copies of the model in the capture (``spec_lang/torch_frontend/deep_copies.py``; round
46f, R46f-4 / R46f-5): a plain ``meta`` tensor held outside the step (an EMA copied in
``parallelize``) is an Opaque captured constant, a fake tensor's deep copy a traced clone.
The end-to-end proofs are in ``tests/adversarial/test_round46f.py`` (slow)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.captured_constants import held_text
from spec_lang.torch_frontend.deep_copies import fake_deepcopy, meta_constants, plain_meta
from spec_lang.torch_frontend.step_state import _Encoder
from spec_lang.torch_frontend.thread_guard import _fake_mode


def _ops(gm):
    return [(n.op, str(n.target)) for n in gm.graph.nodes]


def test_meta_ema_update_is_a_captured_constant():
    """R46f-5: an EMA parameter on meta updated in the step is a ``get_attr`` constant (the
    meta tensor itself, no values), not torch's "convert all Tensors" error."""
    ema = nn.Parameter(torch.empty(3, 3, device="meta"))

    def step(x):
        with meta_constants(_fake_mode()), torch.no_grad():
            ema.mul_(0.9).add_(x, alpha=0.1)
        return [x * 2]

    gm = make_fx(step, tracing_mode="fake")(torch.empty(3, 3, device="meta"))
    ops = _ops(gm)
    assert ("call_function", "aten.mul_.Tensor") in ops
    assert ("call_function", "aten.add_.Tensor") in ops
    consts = [getattr(gm, t) for o, t in ops if o == "get_attr"]
    assert consts and all(c is ema for c in consts)
    assert held_text(consts[0]).startswith("a tensor of shape (3, 3) the step reads")


def test_meta_ema_without_the_patch_raises_and_real_tensors_still_do():
    """Without :func:`meta_constants` torch refuses the meta tensor; with it a real (cpu)
    tensor made outside the step is still refused (its values would be a constant)."""
    ema = torch.empty(3, device="meta")
    real = torch.ones(3)

    def plain(x):
        return [x + ema]

    def with_real(x):
        with meta_constants(_fake_mode()):
            return [x + real * 2]

    for fn in (plain, with_real):
        with pytest.raises(Exception, match="convert all Tensors to FakeTensors"):
            make_fx(fn, tracing_mode="fake")(torch.empty(3))


def test_plain_meta():
    assert plain_meta(torch.empty(2, device="meta"))
    assert plain_meta(nn.Parameter(torch.empty(2, device="meta")))
    assert not plain_meta(torch.empty(2))
    assert held_text(torch.empty(2)) is None


def _with_fake_deepcopy(step, *args):
    saved = FakeTensor.__dict__.get("__deepcopy__")
    FakeTensor.__deepcopy__ = fake_deepcopy(torch.Tensor.__deepcopy__)
    try:
        return make_fx(step, tracing_mode="fake")(*args)
    finally:
        if saved is None:
            del FakeTensor.__deepcopy__
        else:
            FakeTensor.__deepcopy__ = saved


def test_fake_deepcopy_is_a_traced_clone():
    """R46f-4: ``copy.deepcopy`` of a plain fake tensor of the trace (not a parameter): the
    copy is a clone node of the input in the trace's own fake mode, with its gradient flag
    and the user's attribute (as ``Tensor.__deepcopy__`` copies ``__dict__``); an in-place
    update of it traces (it recursed before)."""
    seen = {}

    def step(w):
        w.mark = [1]
        e = copy.deepcopy(w)
        seen.update(mode=e.fake_mode is _fake_mode(), mark=getattr(e, "mark", None) == [1],
                    same=e is w, fake=type(e) is FakeTensor)
        e.mul_(0.9).add_(w, alpha=0.1)
        return [e * 1]

    gm = _with_fake_deepcopy(step, torch.empty(3, 3, device="meta"))
    assert seen == {"mode": True, "mark": True, "same": False, "fake": True}
    ops = _ops(gm)
    assert ("call_function", "aten.clone.default") in ops
    assert not any(o == "get_attr" for o, _ in ops)     # the copy is traced, not a constant


@pytest.mark.parametrize("marked_by", ["torch", "the step"])
def test_a_parameters_deepcopy_is_refused(marked_by):
    """A parameter's copy (``nn.Parameter.__deepcopy__``: no gradient, no attributes,
    R53b-4) and a plain tensor's differ, and the step can mark a plain fake tensor
    ``_is_param`` itself (R53c-4): a deep copy of either is refused, naming the reason."""
    lin = nn.Linear(3, 3, bias=False, device="meta")

    def step(w):
        if marked_by == "torch":
            lin.weight = nn.Parameter(w)
            copy.deepcopy(lin)
        else:
            w._is_param = True
            copy.deepcopy(w)
        return [w * 1]

    with pytest.raises(PlanError, match=r"copy\.deepcopy of a parameter .*R53c-4"):
        _with_fake_deepcopy(step, torch.empty(3, 3, device="meta"))


def test_meta_tensor_fingerprint_has_version():
    """A plain meta tensor has no values, but a write (its version, which the next step can
    read past the ``Tensor._version`` guard: adversarial R53b-3) is a state change, as a new
    shape is; a real tensor's write too."""
    def text(v):
        return _Encoder({}, frozenset()).enc(v)

    m, r = torch.empty(2, device="meta"), torch.zeros(2)
    m0, r0 = text(m), text(r)
    m.add_(1)
    r.add_(1)
    assert m._version == 1 and text(m) != m0
    assert text(r) != r0
    m.resize_(3)
    assert text(m) != m0


def test_meta_version_read_refused():
    """A meta tensor's writes are no state change (above), so a read of its version counter
    by the train file's code (a branch on ``ema._version``) is refused, recorded in the guard;
    torch's own reads and other tensors' pass."""
    from spec_lang.errors import PlanError

    class G:
        path, found = __file__, []

        def note(self, line, what, thread=True):
            self.found.append(f"{line}: {what}")
            return self.found[-1]

    g, ema = G(), torch.empty(2, device="meta")
    seen = {}

    def step(x):
        with meta_constants(_fake_mode(), g):
            seen["x"] = x._version
            with pytest.raises(PlanError, match="version counter"):
                ema._version  # noqa: B018
        return [x * 2]

    make_fx(step, tracing_mode="fake")(torch.empty(2))
    assert seen == {"x": 0} and len(g.found) == 1
    assert "_version" not in vars(torch.Tensor) and ema._version == 0


def test_fake_deepcopy_of_views_refused():
    """Tensors sharing memory share it in the real copy too (a view and its base); clones
    would not: refused with :data:`SHARED`, whether the view or a second tensor of the
    storage is met."""
    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.deep_copies import SHARED

    out = []

    def step(w):
        for held in ([w[0]], [w, w.detach()]):
            try:
                copy.deepcopy(held)
            except PlanError as e:
                out.append(str(e))
        out.append(copy.deepcopy([w, w])[0] is not w)      # one tensor twice: fine
        return [w * 2]

    saved = FakeTensor.__dict__.get("__deepcopy__")
    FakeTensor.__deepcopy__ = fake_deepcopy(torch.Tensor.__deepcopy__)
    try:
        make_fx(step, tracing_mode="fake")(torch.empty(3, 3, device="meta"))
    finally:
        if saved is None:
            del FakeTensor.__deepcopy__
        else:
            FakeTensor.__deepcopy__ = saved
    assert out == [SHARED, SHARED, True]
