"""A held tensor's storage and bytes, as the step-state fingerprint reads them
(:mod:`spec_lang.torch_frontend.step_state`): its geometry and data (:func:`data_digest`), the
storage it lives in (:func:`storage_no`; a goal's by the goal's name, :func:`goal_storages`) and
a fake goal tensor's ``constant`` (:func:`fake_constant`). Split from
:mod:`spec_lang.torch_frontend.process_state`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import torch

__all__ = ["data_digest", "fake_constant", "goal_storages", "storage_no", "storages"]


def data_digest(v: Any) -> str:
    """A held tensor's geometry and, when it has real bytes (a cpu tensor, not fake), a digest
    of them: what the next step can read of it that its version counter may not show.

    * bytes: a write past torch (``ctypes`` at ``data_ptr()``: adversarial R53c-3) bumps no
      version counter;
    * geometry: strides, storage offset and storage size (meta tensors too): written into the
      TensorImpl by ``ctypes``, or by ``as_strided_`` / ``set_`` before a version reset, they
      are a step counter the bytes do not show (R54a-3);
    * a sparse COO tensor: its coalesced flag, sparse and dense dims and ``nnz`` (R54a-2), then
      its indices' and values' geometry and bytes, read with the capture's fake mode off (the
      fingerprint is taken inside it: R54a-1).

    A compressed sparse layout, or a tensor whose parts cannot be read, gives a token that
    differs at every call (its state is never taken for unchanged)."""
    import time

    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _disable_current_modes

    try:
        with _disable_current_modes():
            if v.layout is torch.sparse_coo:   # its flags, then its parts (strided tensors)
                return f"coo{int(v.is_coalesced())},{v.sparse_dim()},{v.dense_dim()}," \
                    f"{v._nnz()}:{data_digest(v._indices())}:{data_digest(v._values())}"
            if v.layout is not torch.strided:  # compressed sparse layouts
                return f"?{time.monotonic_ns()}"
            # and its dispatch keys: the conjugate and negative bits, set with no aten op
            # and no version bump on a meta tensor (``torch._C._set_neg``: R54b-4)
            st = v.untyped_storage()
            geo = f"{tuple(v.stride())}+{v.storage_offset()}/{st.nbytes()}" \
                f"{torch._C._dispatch_keys(v)}"
            if isinstance(v, FakeTensor) or v.device.type != "cpu":
                return geo + ":-"
            # where its bytes are, shared or not, resizable or not: ``share_memory_()`` moves
            # them in place, the same storage object and bytes (R55b-2)
            geo += f"@{st.data_ptr():x},{int(st.is_shared())}{int(st.resizable())}"
            raw = v.detach().contiguous().clone().reshape(-1).view(torch.uint8).numpy().tobytes()
    except Exception:  # noqa: BLE001 -- unreadable: never equal to itself
        return f"?{time.monotonic_ns()}"
    return geo + ":" + hashlib.sha1(raw).hexdigest()[:16]  # noqa: S324 -- not security


def storages(v: Any) -> list[Any]:
    """The storage objects of a held tensor, whose attributes its fingerprint reads (R53c-2): a
    strided tensor's own; a sparse COO tensor's indices' and values' (it has no storage of its
    own: ``untyped_storage()`` raises; read with the capture's fake mode off: R54a-1); none for
    a compressed sparse layout (whose :func:`data_digest` never compares equal)."""
    from torch.utils._python_dispatch import _disable_current_modes

    if v.layout is torch.strided:
        return [v.untyped_storage()]
    if v.layout is torch.sparse_coo:
        with _disable_current_modes():
            parts = (v._indices(), v._values())
        return storages(parts[0]) + storages(parts[1])
    return []


def _storage_of(v: Any) -> Any:
    """The storage object ``v``'s data lives in (a sparse COO tensor's values'), read with the
    capture's modes off. Raises whatever torch raises for a tensor without one (a wrapper
    subclass: its inner tensors have them)."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        w = v._values() if v.layout is torch.sparse_coo else v
        return w.untyped_storage()


def goal_storages(goals: Iterable[tuple[str, Any]]) -> dict[int, str]:
    """Storage address -> the name of the goal tensor whose data lives in it, for ``(name,
    tensor)`` pairs (a wrapper subclass, a DTensor: its inner tensors', through
    ``__tensor_flatten__``). A held tensor pointed at a goal's storage reads as that goal in
    :func:`storage_no` (R54c-3: numbering held tensors only, one pointed at a goal's storage
    kept its text)."""
    out: dict[int, str] = {}
    todo = list(goals)
    while todo:
        name, t = todo.pop()
        flatten = getattr(type(t), "__tensor_flatten__", None)
        if flatten is not None:
            todo.extend((name, getattr(t, k)) for k in t.__tensor_flatten__()[0])
            continue
        try:
            out.setdefault(int(_storage_of(t)._cdata), name)
        except Exception:  # noqa: BLE001, S112 -- no storage: nothing can point at it
            continue
    return out


def storage_no(v: Any, goals: Mapping[int, str] | None = None) -> str:
    """Which storage ``v``'s data lives in: a goal's (``goals``, from :func:`goal_storages`)
    as ``goal:<its name>`` (R54c-3), another by its address. Two held tensors made to share one
    storage (``.data`` set through ``torch._C.TensorBase``'s setter, past the ``Tensor.data``
    guard: R54b-1) or one moved to a fresh storage (R55a-3) change their text; so does its
    Python object's ``id`` (torch keeps it as long as the storage: a storage made at a freed
    one's address is another object, R55c-4). No reference to the storage is kept (a weak
    one was visible to the step: R55b-4): a storage freed and another made at its address is
    a change nothing the next step holds can see (a reference it keeps to the old one keeps it
    alive, and is fingerprinted itself). The address depends
    on the process: only a fingerprint's changes within one process are compared (a held
    tensor's change is UNKNOWN whatever it is: ``UNCOMPARABLE``). A sparse tensor is named by
    its values' storage."""
    import time

    try:
        st = _storage_of(v)
        key = int(st._cdata)
    except Exception:  # noqa: BLE001 -- unreadable: never equal to itself
        return f"?{time.monotonic_ns()}"
    if goals and key in goals:
        return f"goal:{goals[key]}"
    return f"@{key:x}/{id(st):x}"    # and its Python object's, alive as long as it (R55c-4)


def fake_constant(v: Any) -> tuple[frozenset[str], str]:
    """``(keys to skip, text)`` for a fake goal tensor's own ``constant``: the real value it
    stands for, which an in-place op changes (AdamW's ``step``; its bytes made every AdamW
    plan UNKNOWN at stop 53), by kind only. Every other attribute, a fake tensor's own keys
    included, stays in the text (R54b-2: a user value under such a key is state)."""
    from torch._subclasses.fake_tensor import FakeTensor

    c = vars(v).get("constant") if isinstance(v, FakeTensor) else None
    if not isinstance(c, torch.Tensor) or type(c) is not torch.Tensor:
        return frozenset(), ""
    return frozenset({"constant"}), f"(constant=tensor{tuple(c.shape)},{c.dtype},{c.device})"

