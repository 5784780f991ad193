"""``torch.ops`` / ``torch.classes`` in the process-state fingerprint
(``spec_lang/torch_frontend/op_namespaces.py``; adversarial round 65, R65a-1 / R65b-2): what
torch caches there on first use is no change, data the train file keeps there is, and only
torch's own two objects are skipped as modules."""
from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.distributed  # noqa: F401 -- (c10d's operators, before any reading)

from spec_lang.torch_frontend.op_namespaces import (fills_dropped, lazy_name, namespace_data,
                                                    torch_namespace)
from spec_lang.torch_frontend.value_text import _global_text, key_text


def _read() -> str:
    return namespace_data(_global_text, key_text)[0]


def _fills() -> str:
    return namespace_data(_global_text, key_text)[1]


def test_lazy_fills_are_no_change():
    before, filled = _read(), _fills()
    torch.ops.aten.special_bessel_j0          # an operator packet cached on first use
    torch.ops.aten.special_bessel_j0.default
    torch.ops.r65_fresh_namespace             # a namespace made on first use
    torch.ops.higher_order.cond               # a higher-order operator from torch's registry
    torch.ops.c10d.allreduce_.default         # (a TorchBindOpOverload cached in its packet)
    assert _read() == before
    assert not fills_dropped(filled, _fills()) and filled != _fills()


def test_a_cached_operator_dropped_or_replaced_is_a_change():
    # R66a-3: a fill only adds; one dropped, or replaced by a fresh packet of torch's, is not
    ns = torch.ops.aten.__dict__
    torch.ops.aten.special_bessel_j1
    old, before = ns["special_bessel_j1"], _fills()
    try:
        del ns["special_bessel_j1"]
        assert fills_dropped(before, _fills())
        torch.ops.aten.special_bessel_j1           # torch fills it again: another packet
        assert ns["special_bessel_j1"] is not old and fills_dropped(before, _fills())
    finally:
        ns["special_bessel_j1"] = old
    assert not fills_dropped(before, _fills())


def test_what_torch_sets_on_its_packets_is_read_by_value():
    # R66a-2: a counter kept in a packet's __doc__ (torch's prims set one at import), its
    # name lists or its module
    p = torch.ops.aten.special_bessel_y0
    d = object.__getattribute__(p, "__dict__")
    before = _fills()
    for key, value in [("__doc__", "1"), ("_dir", ["r66"]), ("__module__", "r66")]:
        old = d.get(key, d)
        d[key] = value
        try:
            assert fills_dropped(before, _fills()), key
        finally:
            d.pop(key) if old is d else d.__setitem__(key, old)
        assert _fills() == before
    # a prim's own __doc__ changed in place (torch set it at import)
    prim = object.__getattribute__(torch.ops.prims.abs, "__dict__")
    doc = prim["__doc__"]
    prim["__doc__"] = doc + " "
    try:
        assert fills_dropped(before, _fills())
    finally:
        prim["__doc__"] = doc


def _forge(packet, name):
    f = torch._ops.OpOverloadPacket.__new__(torch._ops.OpOverloadPacket)
    d = object.__getattribute__(f, "__dict__")
    d.update(object.__getattribute__(packet, "__dict__"))
    d["_qualified_op_name"], d["__name__"] = f"aten::{name}", name
    return f


def test_a_packet_made_by_hand_is_read():
    # R65h-1: another operator's builtin under the name of this key's, or this operator's
    # builtin with another packet's overloads, is no lazy fill
    ns = torch.ops.aten.__dict__
    torch.ops.aten.mul.Tensor
    mul = ns["mul"]
    before = _read()
    try:
        ns["r66_flag"] = _forge(torch.ops.aten.add, "r66_flag")
        assert _read() != before
        del ns["r66_flag"]
        ns["mul"] = _forge(torch.ops.aten.mul, "mul")    # (mul's own overloads: not its own)
        assert _read() != before
        ns["mul"] = _forge(torch.ops.aten.add, "mul")
        assert _read() != before
        ns["mul"] = mul
        assert _read() == before
    finally:
        ns.pop("r66_flag", None)
        ns["mul"] = mul


def test_a_higher_order_operator_under_another_name_is_read():
    # R65h-2: torch's cond registered under a new key, in torch's registry and the namespace
    cond = torch.ops.higher_order.cond
    before = _read()
    try:
        torch._ops._higher_order_ops["r66_flag"] = cond
        torch.ops.higher_order.__dict__["r66_flag"] = cond
        assert _read() != before
    finally:
        torch._ops._higher_order_ops.pop("r66_flag", None)
        torch.ops.higher_order.__dict__.pop("r66_flag", None)


@pytest.mark.parametrize("where", ["ops", "aten", "classes"])
def test_data_kept_there_is_a_change(where):
    ns = {"ops": torch.ops, "aten": torch.ops.aten, "classes": torch.classes}[where]
    before = _read()
    vars(ns)["_r65_count"] = 1
    try:
        one = _read()
        vars(ns)["_r65_count"] = 2
        two = _read()
    finally:
        del vars(ns)["_r65_count"]
    assert len({before, one, two}) == 3
    assert _read() == before


def test_higher_order_operator_not_torch_s_is_read():
    """An operator under a name torch's registry does not hold (or holds another) is read."""
    before = _read()
    vars(torch.ops.higher_order)["r65_fake"] = object()
    try:
        assert _read() != before
    finally:
        del vars(torch.ops.higher_order)["r65_fake"]


def test_only_torch_s_own_objects_are_skipped():
    assert torch_namespace("torch.ops", torch.ops)
    assert torch_namespace("torch.classes", torch.classes)
    assert not torch_namespace("torch.ops", types.ModuleType("torch.ops"))
    assert not torch_namespace("torch.ops.r65", torch.ops)
    assert not torch_namespace(object(), torch.ops)
    assert lazy_name("torch.ops.x") and lazy_name("torch.classes")
    assert not lazy_name("torch.opsx") and not lazy_name("torch.nn")
    assert sys.modules["torch.ops"] is torch.ops
