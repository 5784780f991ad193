"""A value of the step's fake tensors read by the train file's own code, the error caught
(adversarial round 35d, R35d-2).

In the traced step the train file's tensors are ``FakeTensor``s: they have shapes, no values. A
read of a value raises, and a step that catches the error takes a branch the real run does not:
r35d_03 ``t.data_ptr()``, r35d_04 ``float(t.numpy()[0])``, r35d_10 ``float(f"{t.item():.1f}")``
(``.item()`` of a fake tensor is an unbacked ``SymFloat``, whose ``__format__`` raises), each in
a ``try`` with ``n = 1.0`` as the fallback: EQUIVALENT for a wrong plan (truth w1 0.0070). The
dispatcher sees none of these (they raise before any operator, or from Python), so
:func:`thread_guard.one_thread`'s record of data-dependent errors did not fire.

:func:`refused` (inside ``one_thread``, the traced step) wraps ``FakeTensor``'s (and
``torch.Tensor``'s: ``torch.Tensor.data_ptr(t)``, R37b-2) ``data_ptr``,
``numpy``, ``tolist``, ``__array__``, ``untyped_storage``, ``storage``, ``__format__`` and
``torch.SymFloat`` / ``SymInt``'s ``__format__`` (``float()`` / ``int()`` of an unbacked symbol
guard in the shape env, which ``one_thread`` records), and a fake tensor's storage's
``__getitem__`` / ``tolist`` / ``data_ptr`` (``torch.UntypedStorage``: meta storages raise):
torch's method runs as before; if it raises *and* the call comes straight from the train file's
code (its caller's frame is the train file), the read is recorded and refused when the step
returns, even if the train file catches the error. An uncaught error ends the capture as before;
a call from torch's own code (which may catch its own errors) is left alone, and so is a read
that succeeds (a backed ``SymInt``: a shape).

``copy.deepcopy(t)`` of a fake tensor raises in torch's ``__deepcopy__`` ("Cannot access data
pointer"), called from the ``copy`` module: refused when it raises with the train file anywhere
on the stack (round 38). Pickling (``__reduce_ex__`` / ``__reduce__`` of a fake tensor or a
meta storage: ``pickle.dumps(t)``, ``torch.save``; R37b-2's r37b_12, where pickle itself fails
on the fake tensor's state after every method returned, so nothing above raises) is refused
whenever the train file's code is on the stack, raising or not: the bytes of a fake tensor
hold no values, and the real run's hold them.

The text of a fake tensor or of a symbol (``__repr__`` / ``__str__``: ``str(t)``, ``print(t)``,
``f"{t}"``, ``logging.info("%s", t)``, ``str(t.item())``; R35d-1's r35d_02 parsed ``str(t)`` for
the real run's numbers) is
refused, raising or not, when the first frame up the stack that is neither torch's, numpy's,
the standard library's nor code compiled from a string is the train file's: the real run's
text holds the values.

Not reached: a read in a helper module of the user's (not the train
file), a branch on ``t.is_meta`` / ``type(t)`` that raises nothing (R35d-1,
``docs/torch.md``, "Known limits").
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["refused", "patched", "TENSOR_READS", "SYM_READS", "STORAGE_READS", "PICKLES",
           "DEEP_READS", "TEXTS"]

TENSOR_READS = ("data_ptr", "numpy", "tolist", "__array__", "untyped_storage", "storage",
                "__format__")
SYM_READS = ("__format__",)          # float() / int() guard in the shape env: one_thread's
STORAGE_READS = ("__getitem__", "tolist", "data_ptr")
DEEP_READS = ("__deepcopy__",)      # refused with the train file anywhere on the stack
_HINT = ("the step reads a value of its fake tensors ({what}), which the capture does not have: "
         "it proves the step for every input; a step that catches the error takes another "
         "branch than the real run (R35d-2): compute without a try/except around the read. To "
         "log the loss, return it from train_step and log it after the step returns")


# (id(owner), name) -> the wrapper in place now: what pp_guard.modified must take as torch's
_PATCHED: dict[tuple[int, str], Any] = {}


def patched() -> dict[tuple[int, str], Any]:
    """The wrappers :func:`refused` has in place now, as ``pp_guard.modified``'s ``expected``
    (``FakeTensor`` is one of the classes it watches)."""
    return dict(_PATCHED)


# the owner as the user wrote it
_OWNER = {"FakeTensor": "t", "Tensor": "t", "UntypedStorage": "t.untyped_storage()"}


def _from(path: Path, frame: Any) -> bool:
    try:
        return frame is not None and Path(frame.f_code.co_filename).resolve() == path
    except (OSError, ValueError):
        return False


def _wrap(g: Any, path: Path, owner: type, name: str, original: Any) -> Any:
    from spec_lang.errors import PlanError

    label = f"{_OWNER.get(owner.__name__, owner.__name__)}.{name}"
    # ``copy.deepcopy(t)`` calls ``__deepcopy__`` from the copy module: the train file is
    # further up the stack (a fake tensor's deepcopy raises "Cannot access data pointer")
    deep = name in DEEP_READS

    def read(self: Any, *a: Any, **k: Any) -> Any:
        try:
            return original(self, *a, **k)
        except PlanError:
            raise
        except Exception:
            f = sys._getframe(1)  # noqa: SLF001
            f = _on_stack(path, f) if deep else f if _from(path, f) else None
            if f is None:
                raise
            msg = g.note(f.f_lineno, _HINT.format(what=label), thread=False)
            raise PlanError(msg) from None
    read.__name__ = name
    return read


PICKLES = ("__reduce_ex__", "__reduce__")
TEXTS = ("__repr__", "__str__")     # the real run's text holds the values (R35d-1's r35d_02)


def _fake(self: Any) -> bool:
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(self, (FakeTensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    dev = getattr(self, "device", None)
    return getattr(dev, "type", None) == "meta"


def _on_stack(path: Path, frame: Any) -> Any:
    while frame is not None:
        if _from(path, frame):
            return frame
        frame = frame.f_back
    return None


def _through(frame: Any) -> bool:
    """``frame`` is torch's, numpy's or the standard library's (``Tensor.__format__``,
    ``DTensor``'s repr, ``logging``, ``reprlib``, ``numpy.array2string``), or code compiled
    from a string (``eval("str(t)")``: ``<string>``; R38b-2): a text made there is for its
    caller."""
    import importlib.util
    import sysconfig

    name = frame.f_code.co_filename
    if name == __file__ or name.startswith("<"):    # this module's wrappers; eval / exec
        return True
    paths = sysconfig.get_paths()
    for lib in ("torch", "numpy"):
        spec = importlib.util.find_spec(lib)
        if spec is not None and spec.origin and name.startswith(
                str(Path(spec.origin).parent) + "/"):
            return True
    return name.startswith(paths["stdlib"] + "/") and not name.startswith(paths["purelib"])


def _caller(path: Path, frame: Any) -> Any:
    """The train file's frame if it is the first frame up the stack that :func:`_through` does
    not pass (None otherwise)."""
    while frame is not None and not _from(path, frame) and _through(frame):
        frame = frame.f_back
    return frame if frame is not None and _from(path, frame) else None


def _wrap_pickle(g: Any, path: Path, owner: type, name: str, original: Any) -> Any:
    from spec_lang.errors import PlanError

    label = f"{_OWNER.get(owner.__name__, owner.__name__)}.{name}"
    find = _caller if name in TEXTS else _on_stack

    def reduce(self: Any, *a: Any, **k: Any) -> Any:
        f = find(path, sys._getframe(1)) if _fake(self) else None  # noqa: SLF001
        if f is None:
            return original(self, *a, **k)
        msg = g.note(f.f_lineno, _HINT.format(what=label), thread=False)
        raise PlanError(msg)
    reduce.__name__ = name
    return reduce


@contextlib.contextmanager
def refused(g: Any) -> Iterator[None]:
    """Within the block (the traced step), a value read of the train file's own that raises on
    a fake tensor or an unbacked symbol is recorded in ``g`` (``thread_guard._Guard``) and
    raised as a ``PlanError`` naming its line; torch's methods are given back on exit.

    Raises:
        PlanError: from the read itself (the train file's line).
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    from spec_lang.torch_frontend.deep_copies import fake_deepcopy

    path = Path(g.path).resolve()
    # torch.Tensor too: ``torch.Tensor.data_ptr(t)`` calls the base class's method past
    # FakeTensor's (R37b-2); on a real tensor the read works and the wrapper passes it on
    targets = [(c, n) for c in (FakeTensor, torch.Tensor) for n in TENSOR_READS + DEEP_READS] + [
        (c, n) for c in (torch.SymFloat, torch.SymInt) for n in SYM_READS] + [
        (torch.UntypedStorage, n) for n in STORAGE_READS]
    pickles = [(c, n) for c in (FakeTensor, torch.Tensor, torch.UntypedStorage) for n in PICKLES]
    pickles += [(c, n) for c in (FakeTensor, torch.Tensor, torch.SymFloat, torch.SymInt,
                                 torch.SymBool) for n in TEXTS]
    saved: list[tuple[type, str, Any, bool]] = []
    for owner, name in targets + pickles:
        original = getattr(owner, name, None)
        if original is None:
            continue
        saved.append((owner, name, vars(owner).get(name), name in vars(owner)))
        wrap = _wrap_pickle if name in PICKLES + TEXTS else _wrap
        if name in DEEP_READS:      # a fake tensor's copy is a traced clone (R46f-4)
            original = fake_deepcopy(original, g)
        setattr(owner, name, wrap(g, path, owner, name, original))
        _PATCHED[(id(owner), name)] = vars(owner)[name]
    try:
        yield
    finally:
        _PATCHED.clear()
        for owner, name, before, had in reversed(saved):
            if had:
                setattr(owner, name, before)
            else:
                delattr(owner, name)
