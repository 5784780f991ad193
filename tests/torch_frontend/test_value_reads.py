"""A value of the step's fake tensors read by the train file's own code, the error caught, is
refused (``spec_lang/torch_frontend/value_reads.py``; adversarial round 35d, R35d-2), in seconds
with ``make_fx`` on fake tensors as the capture traces. The slow proves of the plan files
(r35d_03, r35d_04, r35d_10) are in ``tests/adversarial/test_round35d.py``."""

from __future__ import annotations

import copy
import io
import logging
import pickle
import reprlib

import numpy
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import value_reads
from spec_lang.torch_frontend.thread_guard import threads_refused, watched

HERE = __file__


def _objects(t):
    """A numpy object array holding ``t`` (no ``__array__`` read)."""
    a = numpy.empty(1, dtype=object)
    a[0] = t
    return a


def _caught(read):
    def step(y: torch.Tensor) -> torch.Tensor:
        t = torch.ones(1)
        try:
            n = read(t)
        except Exception:  # noqa: BLE001 -- the train file's fallback (R35d-2)
            n = 1.0
        return y * n
    return step


@pytest.mark.parametrize("read,label", [
    (lambda t: (t.data_ptr(), 2.0)[1], "t.data_ptr"),
    (lambda t: (torch.Tensor.data_ptr(t), 2.0)[1], "t.data_ptr"),        # R37b-2
    (lambda t: float(torch.Tensor.numpy(t)[0]), "t.numpy"),
    (lambda t: float(t.numpy()[0]), "t.numpy"),
    (lambda t: float(f"{t.item():.1f}"), "SymFloat.__format__"),
    (lambda t: float(format(t, ".1f")), "t.__format__"),
    (lambda t: float(t.untyped_storage()[0]), r"t.untyped_storage\(\).__getitem__"),
    (lambda t: float(t.untyped_storage().tolist()[0]), r"t.untyped_storage\(\).tolist"),
    # round 38: pickling (R37b-2's r37b_12) and deepcopy, reached from pickle / copy / torch
    (lambda t: (pickle.dumps(t), 2.0)[1], "t.__reduce_ex__"),
    (lambda t: (torch.save(t, io.BytesIO()), 2.0)[1], "t.__reduce_ex__"),
    (lambda t: (pickle.dumps(t.untyped_storage()), 2.0)[1],
     r"t.untyped_storage\(\).__reduce_ex__"),
    # round 38: the text of a fake tensor or of a symbol (R35d-1's r35d_02), raising or not
    (lambda t: 2.0 if "[2." in str(t) else 1.0, "t.__str__"),
    (lambda t: 2.0 if "2." in repr(t) else 1.0, "t.__repr__"),
    (lambda t: 2.0 if "2." in f"x {t} y" else 1.0, "t.__str__"),
    (lambda t: 2.0 if "2." in "%s" % (t,) else 1.0, "t.__str__"),
    (lambda t: 2.0 if "2." in reprlib.repr(t) else 1.0, "t.__repr__"),
    (lambda t: (logging.getLogger("r38").warning("%s", t), 1.0)[1], "t.__str__"),
    (lambda t: 2.0 if str(t.sum().item()) == "2.0" else 1.0, "SymFloat.__str__"),
    (lambda t: 2.0 if repr(t.long().sum().item()) == "2" else 1.0, "SymInt.__repr__"),
    # R38b-2: through code compiled from a string, through numpy
    (lambda t: 2.0 if "2." in eval("str(t)", {"t": t}) else 1.0, "t.__str__"),  # noqa: S307
    (lambda t: 2.0 if "2." in numpy.array2string(_objects(t)) else 1.0, "t.__repr__"),
])
def test_a_value_read_caught_by_the_step_is_refused_with_its_line(read, label):
    with pytest.raises(PlanError, match=rf"{HERE}:\d+: the step reads a value of its fake "
                       rf"tensors \({label}\).*R35d-2.*return it from train_step") as e:
        with threads_refused(HERE):
            make_fx(watched(_caught(read)), tracing_mode="fake")(torch.ones(4))
    assert "thread-local" not in str(e.value), e.value


def test_a_deepcopy_is_a_traced_clone_and_of_a_view_refused():
    """Since stop 53 (R46f-4, ``deep_copies``) ``copy.deepcopy`` of a fake tensor of the step
    is a traced clone, as the real copy is its values: no refusal (round 38 refused it as a
    read that raised). A deep copy of a view (memory shared for real) is refused with its
    line, even caught."""
    from spec_lang.torch_frontend.deep_copies import SHARED

    with threads_refused(HERE):
        gm = make_fx(watched(_caught(lambda t: (copy.deepcopy(t), 2.0)[1])),
                     tracing_mode="fake")(torch.ones(4))
    assert "aten.clone.default" in {str(n.target) for n in gm.graph.nodes}, gm.graph
    with pytest.raises(PlanError, match=rf"{HERE}:\d+: copy.deepcopy of a tensor that shares") \
            as e:
        with threads_refused(HERE):
            make_fx(watched(_caught(lambda t: (copy.deepcopy(t[0:1]), 2.0)[1])),
                    tracing_mode="fake")(torch.ones(4))
    assert SHARED in str(e.value)


def test_torchs_methods_are_given_back_and_nothing_is_left_patched():
    before = {(c, n): vars(c).get(n) for c in (FakeTensor, torch.Tensor)
              for n in value_reads.TENSOR_READS}
    sym = {(c, n): vars(c).get(n) for c in (torch.SymFloat, torch.SymInt)
           for n in value_reads.SYM_READS}
    sym |= {(torch.UntypedStorage, n): vars(torch.UntypedStorage).get(n)
            for n in value_reads.STORAGE_READS + value_reads.PICKLES}
    sym |= {(c, n): vars(c).get(n) for c in (FakeTensor, torch.Tensor, torch.SymFloat,
                                             torch.SymInt, torch.SymBool)
            for n in value_reads.TEXTS + value_reads.PICKLES + value_reads.DEEP_READS}
    with pytest.raises(PlanError):
        with threads_refused(HERE):
            make_fx(watched(_caught(lambda t: t.data_ptr())), tracing_mode="fake")(torch.ones(4))
    assert {(c, n): vars(c).get(n) for (c, n) in before} == before
    assert {(c, n): vars(c).get(n) for (c, n) in sym} == sym
    assert value_reads.patched() == {}


def test_a_read_that_works_and_torchs_own_reads_are_left_alone():
    """A backed SymInt (a shape) formats as before; a read outside the train file's code (here a
    helper of this test module is the train file: a read in torch's code is not) is not
    recorded."""
    def step(y: torch.Tensor) -> torch.Tensor:
        k = int(f"{y.shape[0]:d}")               # works on a fake tensor: not refused
        return y * k

    with threads_refused(HERE):
        gm = make_fx(watched(step), tracing_mode="fake")(torch.ones(4))
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.mul.Tensor]

    def other_file(y: torch.Tensor) -> torch.Tensor:
        return y * 2.0

    with threads_refused("/nonexistent/train.py"):          # this file is not the train file
        make_fx(watched(_caught(lambda t: t.data_ptr())), tracing_mode="fake")(torch.ones(4))
        make_fx(watched(other_file), tracing_mode="fake")(torch.ones(4))


def test_texts_without_values_are_left_alone():
    """A shape's, a dtype's or a device's text has no value in it; a log call below its level
    never formats the tensor; ``repr`` inside torch's own code (here a helper of another file)
    is not the train file's."""
    def step(y: torch.Tensor) -> torch.Tensor:
        s = f"{y.shape} {y.dtype} {y.device} {str(y.size(0))}"
        logging.getLogger("r38-off").debug("%s", y)      # DEBUG is off: never formatted
        return y * len(s)

    with threads_refused(HERE):
        gm = make_fx(watched(step), tracing_mode="fake")(torch.ones(4))
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.mul.Tensor]
    with threads_refused("/nonexistent/train.py"):
        make_fx(watched(_caught(lambda t: (str(t), 1.0)[1])), tracing_mode="fake")(torch.ones(4))


def test_an_uncaught_read_ends_the_capture_with_the_refusal():
    def step(y: torch.Tensor) -> torch.Tensor:
        return y * float(torch.ones(1).numpy()[0])

    with pytest.raises(PlanError, match=r"\(t.numpy\)"):
        with threads_refused(HERE):
            make_fx(watched(step), tracing_mode="fake")(torch.ones(4))
