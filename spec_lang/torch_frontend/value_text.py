"""How one value is named in a step-state fingerprint (split from
:mod:`spec_lang.torch_frontend.process_state`, which reads every module's globals with these):
data by value through its base type's C ``repr``, an object by its identity (kept alive until
the fingerprints are compared) and its own attributes, a function by the identities of its
parts, a namespace entry by an identity-free name (:func:`_ident`). None of these runs the
value's own code (adversarial rounds 56a-56f, ``tests/adversarial/ATTEMPTS.md``).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import gc
import hashlib
import marshal
import math
import struct
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

from spec_lang.torch_frontend.module_members import (
    CLASS_DICT, FLAGS, HEAPTYPE, MRO, library_class, private_globals)

__all__ = ["MODULE_DUNDERS", "digest_texts", "dunder_text", "identity_text", "key_text",
           "object_text", "module_dict", "one_fingerprint", "own_dict", "prim_repr",
           "release_kept"]

UNCOMPARABLE = "~"          # prefix of a value whose new content cannot be compared
# prefix of a value prove --torch cannot read (no attributes, over the budget): whether the
# step changed it is not known, so it is reported whether or not its text changed (R8-1)
UNREADABLE = UNCOMPARABLE + "!"


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]  # noqa: S324 -- a digest


def digest_texts(parts: list[Any]) -> str:
    """The digest of ``parts``, a list of exact ``str`` / ``tuple`` / ``None`` (the texts of a
    module's globals), in ``marshal`` format 0: written in C, one-to-one (each item's type and
    length are written; format 0 writes no back-references and does not mark interned
    strings, so equal texts give equal bytes), and it runs no code of any value (only exact
    built-in types are written; a subclass or any other object raises ``ValueError``: an
    internal error, never a digest). ``repr`` of the same
    texts cost a capture child of the 8B TP8 0.17 CPU s a fingerprint (38 MB of text;
    ``marshal`` 0.03 s, stop 58)."""
    return hashlib.sha1(marshal.dumps(parts, 0)).hexdigest()[:16]  # noqa: S324 -- a digest


def _name(x: Any) -> str:
    """A ``__module__`` (any object a class body or an assignment put there) as text: a str
    as it is, anything else by its type (no ``__str__`` of the value's runs)."""
    return x if type(x) is str else f"<{type(x).__qualname__}>"


def _type_module(t: type) -> str:
    """``t``'s ``__module__`` through ``type``'s own descriptor (a metaclass's does not run);
    "?" for a class made with globals of its own, which has none (R62b-5, R64a-4)."""
    try:
        return _name(type.__dict__["__module__"].__get__(t))
    except AttributeError:
        return "?"


def _qual(t: type) -> str:
    """``module.qualname`` of the class ``t``, through ``type``'s own descriptors."""
    return f"{_type_module(t)}.{type.__dict__['__qualname__'].__get__(t)}"


# a torch module's data globals: process-specific (``distributed_c10d._group_count``, a
# composable API's uuid ``STATE_KEY``, function addresses in ``torch._C._dynamo.guards``)
_DATA = (bool, int, float, complex, str, bytes)


# what the import system and the warnings module put in a module's namespace: read by
# :func:`dunder_text` (R56a-1: ``math.__doc__`` grown by one character per step was unseen);
# any other ``__x__`` global of a module is read as any global (R55e-1: ``math.__r55e__``)
MODULE_DUNDERS = frozenset({"__name__", "__doc__", "__package__", "__loader__", "__spec__",
                            "__path__", "__file__", "__cached__", "__builtins__",
                            "__warningregistry__"})


def dunder_text(k: str, v: Any) -> str | None:
    """A module's import-system entry ``k`` (one of :data:`MODULE_DUNDERS`): a string, number,
    bytes or None by value (:func:`_data_text`; a subclass of one by :func:`object_text`,
    R56c-1); ``__warningregistry__`` not at all while it has the shape ``warnings`` gives it
    (``"version"`` -> int, ``(text, category, lineno)`` -> True: a warning the step shows the
    first time adds to it; a counter kept there in that shape is not seen: R56b-1, open),
    else by identity; anything else by identity (R56a-1), kept alive until compared
    (:func:`identity_text`). Identities are compared before and after the step in one process
    only. Nothing of the value's own code runs."""
    if k == "__warningregistry__" and type(v) is dict and all(
            (type(x) is str and x == "version" and type(y) is int)
            or (type(x) is tuple and len(x) == 3 and type(x[0]) is str
                and issubclass(type(x[1]), type) and type(x[2]) is int and y is True)
            for x, y in v.items()):
        return None
    if v is None or type(v) in _DATA:
        return _data_text(v)
    if issubclass(type(v), _DATA):     # its own attributes too (R56c-1)
        return object_text(v)
    return identity_text(v)


# what an identity in a fingerprint names, alive until the fingerprints are compared
# (``step_state.state_changes`` releases them): an object made at a freed one's address is not
# taken for it (R56b-2: ``json._default_encoder`` dropped and a new one made until one lands at
# its address). An object only this list holds after the step was dropped by the step, and
# its entry has changed already (another identity, or no entry): its finalizer, run when the
# list is released, changes no verdict.
_KEPT: list[Any] = []


def identity_text(v: Any) -> str:
    """``v``'s type and identity, ``v`` kept alive until :func:`release_kept`."""
    _KEPT.append(v)
    return f"{_qual(type(v))}@{id(v)}"


def release_kept() -> None:
    """Drop what :func:`identity_text` keeps (after the fingerprints are compared)."""
    _KEPT.clear()


def _data_text(v: Any) -> str:
    """None, a number, a string or bytes by value, read by its base type's C ``__repr__``
    (a subclass's own ``__repr__`` is never called: R56b-3), bytes over 64 by a digest."""
    if v is None:
        return "NoneType:None"
    base = next(b for b in _DATA if issubclass(type(v), b))
    sub = "" if type(v) is base else f"({_qual(type(v))})"
    if base is bytes and len(v) > 64:
        return f"bytes{sub}:{len(v)}:{hashlib.sha1(bytes(v)).hexdigest()}"  # noqa: S324
    if base is int and int.bit_length(v) > 256:   # (repr raises past 4300 digits: R56c-3)
        hx = int.__format__(v, "x").encode()
        return f"int{sub}:{len(hx)}:{hashlib.sha1(hx).hexdigest()}"  # noqa: S324
    return f"{base.__name__}{sub}:{prim_repr(base, v)}"


def key_text(k: Any) -> str:
    """A namespace key: a ``str`` as it is, anything else by :func:`object_text` (a str
    subclass's own ``__repr__`` or ``__format__`` is never called: R56d-1, R56d-2). One to
    one: a ``str`` starting with ``<`` is written ``<str '...'>`` by its ``repr``, so no str
    key reads as another key's ``<key ...>`` (R58b-5: a str key spelled as an ``object()``
    key's text took its place in ``math``'s namespace, the digest unchanged)."""
    if type(k) is str:
        return k if not k or k[0] != "<" else f"<str {str.__repr__(k)}>"
    return f"<key {object_text(k)}>"


def prim_repr(base: type, v: Any) -> str:
    """``base.__repr__(v)`` for a primitive ``v`` (``base`` one of :data:`_DATA`), a NaN with
    its bits (``repr`` says ``nan`` for every payload: R56d-5)."""
    if base is float and math.isnan(v):
        return f"nan:{struct.pack('<d', v).hex()}"
    if base is complex:
        re, im = complex.real.__get__(v), complex.imag.__get__(v)
        if math.isnan(re) or math.isnan(im):
            return f"complex:{struct.pack('<dd', re, im).hex()}"
    return base.__repr__(v)


def _global_text(k: str, v: Any) -> str | None:
    """Another module's global ``k``: :func:`dunder_text` for the import system's entries;
    None, a number, a string or bytes by value; a C function or a loaded module by its name
    (the module is read as its own entry); anything else by :func:`object_text`: a plain
    object (R56a-3: ``json._default_encoder`` replaced by another ``JSONEncoder(indent=n)``),
    a data subclass (R56c-1), a function, a class or a module not in ``sys.modules``
    (R56c-2: a closure over another value, a new ``ModuleType``). What such an object holds,
    changed in place, is not read (docs/torch.md, "Where the fingerprint stops")."""
    if type(k) is str and k in MODULE_DUNDERS:
        return dunder_text(k, v)
    t = type(v)
    if v is None or t in _DATA:
        return _data_text(v)
    if issubclass(t, (types.BuiltinMethodType, types.MethodWrapperType)):
        owner = v.__self__     # a C method bound to an object: that object too (R56d-3)
        if owner is not None and type(owner) is not types.ModuleType:   # (and its own
            return f"{_ident(v)}:" + (_data_text(owner) if type(owner) in _DATA   # attributes:
                                      else object_text(owner))                  # R56e-3)
    if (issubclass(t, _NO_CODE) and not issubclass(t, (types.ModuleType, *_DATA))) or (
            t is types.ModuleType and sys.modules.get(vars(v).get("__name__")) is v):
        return _ident(v)
    return object_text(v)


# a text no value's ``repr`` can contain (a NUL byte): an entry holding it is unreadable
TOO_DEEP = "\x00partial nested too deep\x00"
_PARTIAL_DEPTH = 8


def object_text(v: Any, depth: int = 0, budget: list[int] | None = None) -> str:
    """What :func:`_ident` says of ``v``, its identity (:func:`identity_text`) and its own
    attributes' :func:`_ident` (a plain module's globals); a Python function by the identities
    of its parts (below); a ``functools.partial`` with its function, arguments and keywords,
    C members read through ``partial``'s own descriptors (R58g-2: a signal handler's); one
    nested past :data:`_PARTIAL_DEPTH` is :data:`TOO_DEEP` (R58h-2), and so is a method or
    partial reached through that many methods and partials (a cycle of two: R59b-2; 5,000
    nested methods: R56f-2). ``budget``: :func:`deep_text`'s count of values left to read.
    No code of the value's runs."""
    if depth >= _PARTIAL_DEPTH and (type(v) is types.MethodType
                                    or issubclass(type(v), functools.partial)):
        return TOO_DEEP         # (the entry holding it is unreadable: R58h-2)
    if type(v) is types.FunctionType:
        # by the identities of its parts, kept alive until compared (as fast as the suite's
        # budget needs): its code, name, qualified name, module, doc (R56f-3), defaults,
        # keyword defaults, annotations, dict and closure cells' contents (R56c-2); the dicts'
        # contents too (changed in place), less torch's ``__dynamo_disable`` cache
        own, an, kd = v.__dict__, v.__annotations__, v.__kwdefaults__   # (each a dict or a
        # subclass of one: read through dict's own methods, never the subclass's: R57a-1)
        parts = (v, v.__code__, v.__name__, v.__qualname__, v.__module__, v.__doc__,
                 v.__defaults__, kd, an, own, *(_cell(c) for c in v.__closure__ or ()))
        _KEPT.extend(parts)
        text = "fn@" + ",".join([str(id(x)) for x in parts])
        for tag, dct in (("d", own), ("a", an), ("k", kd)):
            if dct is not None and dict.__len__(dct):
                skip = _dynamo_cache(v) if tag == "d" else frozenset()
                text += f":{tag}" + repr(sorted(
                    (x if type(x) is str else _qual(type(x)), _ident(y))
                    for x, y in list(dict.items(dct)) if type(x) is not str or x not in skip))
        return text
    text = _ident(v) + identity_text(v)
    if type(v) is types.MethodType:          # a Python method: its function and object (R56e-3)
        return text + f":{object_text(v.__func__, depth + 1, budget)}:" \
                      f"{object_text(v.__self__, depth + 1, budget)}"
    if issubclass(type(v), functools.partial):
        func, args, kw = (functools.partial.__dict__[a].__get__(v)
                          for a in ("func", "args", "keywords"))
        parts = [func, *(args if type(args) is tuple else [args]),
                 *(dict.values(kw) if type(kw) is dict else [kw])]
        keys = sorted(key_text(k) for k in dict.keys(kw)) if type(kw) is dict else ""
        text += ":partial(" + ",".join(_part_text(x, depth + 1, budget)
                                       for x in parts) + f"{keys})"
    own = vars(v) if type(v) is types.ModuleType else own_dict(v)
    if own is None:
        return text
    return text + repr(sorted((x if type(x) is str else _qual(type(x)), _ident(y))
                              for x, y in list(dict.items(own))))


# values :func:`deep_text` reads from one root before it gives up (TOO_DEEP: unreadable)
_DEEP_BUDGET = 20_000


# a class's entries the interpreter and the standard library fill lazily (copy's slot names,
# abc's caches: read by identity only, not with what they hold)
_LAZY_CLASS_ENTRIES = frozenset({"__slotnames__", "_abc_impl"})


def _class_texts(cls: type, depth: int, budget: list[Any]) -> list[str]:
    """The own namespaces of the Python classes in ``cls``'s MRO not read yet in this
    :func:`deep_text` call, each entry with what it holds (R63b-5: a handler's class keeping a
    counter ``n``; R62b-3 for modes), lazily filled entries by identity; a library's class
    (:func:`module_members.library_class`) by identity only."""
    out = []
    for k in MRO(cls):
        if not FLAGS(k) & HEAPTYPE or id(k) in budget[1] or library_class(k):
            continue
        budget[1][id(k)] = k
        # (a key that is not a str, as ``type(name, bases, ns)`` allows, by its type only:
        # comparing or formatting it would run its code)
        items = [(n if type(n) is str else "<" + _qual(type(n)) + ">", v)
                 for n, v in list(dict.items(dict(CLASS_DICT(k))))]
        for name, val in sorted(items, key=lambda e: e[0]):
            if name in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"):
                continue
            out.append(f"{_qual(k)}.{name}=" + (object_text(val) if name in _LAZY_CLASS_ENTRIES
                                                else _part_text(val, depth + 1, budget)))
    return out


def deep_text(v: Any) -> str:
    """A value the interpreter may call on the step's behalf (a signal handler, the user's
    finalizer and its arguments, an exit callback and its arguments, a codec function or a
    cached ``CodecInfo``: ``c_registries``) read with everything it holds, to
    :data:`_PARTIAL_DEPTH` levels and :data:`_DEEP_BUDGET` values (past either,
    :data:`TOO_DEEP`): what :func:`object_text` reads, and what it holds by reference -- a
    function's closure cells' contents and defaults, an object's attribute values and the
    references its C type keeps (``gc.get_referents``: a namedtuple's or frozenset's items, an
    ``operator.methodcaller``'s arguments, a ``staticmethod``'s function; R59b-1) and C data
    (``c_data.c_value``); modules, classes and the objects ``step_state`` names
    (:func:`trained_objects`) by :func:`object_text` only; any other tensor is unreadable
    (R59c-1). No code of the value's runs."""
    return _part_text(v, 0, [_DEEP_BUDGET, {}])


# ids of the model's modules, the optimizer, the parameters, buffers, gradients and optimizer
# state while ``step_state`` reads the process state (:func:`trained_objects`)
_TRAINED: set[int] = set()


@contextlib.contextmanager
def trained_objects(ids: Iterable[int]) -> Iterator[None]:
    """While in the block, :func:`deep_text` reads the objects with these ids (the step's own
    state, which ``step_state`` reads and compares by name) by identity and own attributes only,
    so a SIGTERM handler that checkpoints the model is no change when the step trains it. Any
    other module, optimizer or tensor is read in full, a tensor unreadable (R59c-1)."""
    _TRAINED.update(ids)
    try:
        yield
    finally:
        _TRAINED.clear()


def _torch_tensor() -> tuple[type, ...]:
    torch = sys.modules.get("torch")
    return () if torch is None else (torch.Tensor,)


def _part_text(x: Any, depth: int, budget: list[int] | None = None) -> str:
    """A ``functools.partial``'s function, argument or keyword value (``budget`` None), or a
    value :func:`deep_text` reads: by value; an exact tuple with its items (R58h-3); a C
    method bound to an object with that object (R58h-4); under :func:`deep_text` also what
    :func:`object_text` leaves unread (its docstring). Each level counts in the depth."""
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            return TOO_DEEP
    if x is None or type(x) in _DATA:
        return _data_text(x)
    if depth >= _PARTIAL_DEPTH:
        return TOO_DEEP
    t = type(x)
    if t is tuple:
        return "(" + ",".join(_part_text(y, depth + 1, budget) for y in tuple.__iter__(x)) + ")"
    name = dict.get(module_dict(x), "__name__") if t is types.ModuleType else None
    if budget is not None and type(name) is str and sys.modules.get(name) is x:
        return _ident(x)        # a loaded module: its globals are an entry of their own
    text = object_text(x, depth, budget)
    if issubclass(t, (types.BuiltinMethodType, types.MethodWrapperType)):
        owner = x.__self__
        if owner is not None and type(owner) is not types.ModuleType:
            text += ":" + _part_text(owner, depth + 1, budget)
        return text
    if budget is not None and t is types.MethodType and id(x) not in _TRAINED:
        # its function and its object with what they hold (R63b-4: a list on the object;
        # R63d-1: a library's object too, ``argparse.Namespace(box=[0]).__repr__``)
        return text + "{" + _part_text(x.__func__, depth + 1, budget) + "," + \
            _part_text(x.__self__, depth + 1, budget) + "}"
    if budget is not None and issubclass(t, type) and id(x) not in _TRAINED:
        return text + "{" + ",".join(_class_texts(x, depth, budget)) + "}"
    if budget is None or issubclass(t, (types.ModuleType, type)) \
            or t is types.MethodType or issubclass(t, functools.partial) or id(x) in _TRAINED:
        return text             # (a partial's parts: object_text read them; the step's own
        #                         state is read and compared by step_state)
    if issubclass(t, _torch_tensor()):
        return TOO_DEEP         # a tensor not the model's: its values are not read (R59c-1)
    from spec_lang.torch_frontend.c_data import c_value  # noqa: PLC0415 -- (imports this one)

    by_value = c_value(x, depth, budget)       # C state that is no reference (R59c-2)
    if by_value is not None:
        return text + by_value
    if t is types.FunctionType:      # (its own attributes too: R62b-1, a counter in f.box[0])
        kd, own = x.__kwdefaults__, own_dict(x)
        # its private globals once in the text (the functions of one ``exec``'d namespace
        # each hold all of it: read again for each, a SIGTERM handler's cost 3 s a fingerprint
        # before it ran out of budget)
        g = x.__globals__
        seen = id(g) in budget[1]
        budget[1][id(g)] = g
        held = [_cell(c) for c in x.__closure__ or ()] + list(x.__defaults__ or ()) + (
            list(dict.values(kd)) if kd else []) + (list(dict.values(own)) if own else []) + \
            ([] if seen else private_globals(x))
    else:
        own = own_dict(x)
        held = [r for r in gc.get_referents(x) if r is not own and r is not t] + (
            list(dict.values(own)) if own else [])
    if held:
        text += "{" + ",".join(_part_text(r, depth + 1, budget) for r in held) + "}"
    if t is not types.FunctionType and FLAGS(t) & HEAPTYPE:
        text += "<" + ",".join(_class_texts(t, depth, budget)) + ">"   # (its class: R63b-5)
    return text


_MODULE_DICT = types.ModuleType.__dict__["__dict__"]


def module_dict(m: types.ModuleType) -> dict:
    """A module's namespace through the C member of ``ModuleType`` (a subclass's own
    ``__dict__`` property, which ``vars`` would call, never runs: R57a-3's family)."""
    return _MODULE_DICT.__get__(m)


def own_dict(v: Any) -> dict | None:
    """``v.__dict__`` through the C descriptor its type gives instances (a dict, or a subclass of
    one: read it through ``dict``'s own methods, R57a-1, R57a-3); None when a class of ``v``'s
    defines ``__dict__`` otherwise (no code of the value's runs)."""
    for cls in type(v).__mro__:
        d = cls.__dict__.get("__dict__")
        if d is not None:
            if type(d) not in (types.GetSetDescriptorType, types.MemberDescriptorType):
                return None
            try:
                out = d.__get__(v, type(v))
            except Exception:  # noqa: BLE001 -- unreadable: the identity says it
                return None
            return out if issubclass(type(out), dict) else None
    return None


# values that hold no Python code of anyone's: C functions and descriptors, plain data
_NO_CODE = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
            types.GetSetDescriptorType, types.MemberDescriptorType,
            types.ClassMethodDescriptorType, types.MethodWrapperType, types.ModuleType,
            bool, int, float, complex, str, bytes, type(None))


def _function_text(f: Any) -> str:
    code = getattr(f, "__code__", None)
    return _digest(repr(code.co_code)) if code is not None else ""


@functools.lru_cache(maxsize=1 << 16)
def _bytecode_digest(code: bytes) -> str:
    """(cached: ~20,000 of torch's functions are read per fingerprint)"""
    return _digest(repr(code))


# :func:`_ident`'s texts while one fingerprint is read (:func:`one_fingerprint`; by identity:
# no code runs between two reads, and each entry holds its object, so no address is reused)
_IDENTS: list[dict[int, tuple[Any, str]]] = []


@contextlib.contextmanager
def one_fingerprint() -> Iterator[None]:
    """While it is open, :func:`_ident` names each object once (a fingerprint reads an object
    many modules hold many times: ``typing.Any``, a re-exported function)."""
    _IDENTS.append({})
    try:
        yield
    finally:
        _IDENTS.pop()


def _ident(v: Any) -> str:
    """An identity-free name of a namespace entry: what replacing it changes."""
    if not _IDENTS:
        return _ident_text(v)
    memo = _IDENTS[-1]
    hit = memo.get(id(v))
    if hit is None:
        hit = memo[id(v)] = (v, _ident_text(v))
    return hit[1]


def _ident_text(v: Any) -> str:
    if issubclass(type(v), types.FunctionType):
        c = v.__code__
        return f"fn:{_name(v.__module__)}.{v.__qualname__}:{c.co_filename}:" \
               f"{c.co_firstlineno}:{_bytecode_digest(c.co_code)}"
    if issubclass(type(v), types.ModuleType):
        name = module_dict(v).get("__name__", "")          # (torch.classes raises on getattr)
        # a stand-in module under a loaded module's name is not that module
        return f"module:{_name(name)}" if type(name) is str and sys.modules.get(name) is v \
            else f"module:{_name(name)}(a copy)"
    if issubclass(type(v), type):   # (a class made with exec's own globals has no __module__)
        return f"class:{_qual(v)}"
    if v is None or issubclass(type(v), _DATA):       # by value (R56b-3)
        return _data_text(v)
    if issubclass(type(v), (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return f"builtin:{_name(v.__module__)}.{v.__qualname__}"
    return _qual(type(v))             # (torch.classes raises on getattr)


def _dynamo_cache(f: types.FunctionType) -> frozenset[str]:
    """``{"__dynamo_disable"}`` when ``f`` holds torch's own cache there: ``torch._compile.
    _disable_dynamo`` sets it on the function it wraps at the first call, to
    ``torch._dynamo.disable(f)`` (``DisableContext.__call__``'s ``_fn`` closing over ``f``),
    a step that calls ``torch.utils.checkpoint.checkpoint`` for the first time leaves it
    (round 38e, r38e_10). Anything else there is read (the wrapper calls it)."""
    d = dict.get(f.__dict__, "__dynamo_disable") if issubclass(type(f.__dict__), dict) else None
    if type(d) is not types.FunctionType or d.__code__.co_name != "_fn" \
            or d.__globals__.get("__name__") != "torch._dynamo.eval_frame" \
            or not any(_cell(c) is f for c in d.__closure__ or ()):
        return frozenset()
    # what the closure holds besides f: a DisableContext whose callback is None (a
    # DisableContext with another callback compiles f at every call: R39a-3)
    # (the module taken out of sys.modules by the train file: nothing is skipped)
    ctx_type = getattr(sys.modules.get("torch._dynamo.eval_frame"), "DisableContext", None)
    for c in d.__closure__ or ():
        x = _cell(c)
        if x is not f and not (type(x) is ctx_type and x.callback is None):
            return frozenset()
    from spec_lang.torch_frontend.op_guard import current_baseline  # noqa: PLC0415

    own = current_baseline().own_code(types.SimpleNamespace(f_globals=d.__globals__,
                                                            f_code=d.__code__))
    return frozenset({"__dynamo_disable"}) if own else frozenset()


def _cell(c: Any) -> Any:
    try:
        return c.cell_contents
    except ValueError:
        return "<empty cell>"


def _items(d: Any) -> list[tuple[Any, Any]]:
    """A dict's (or a dict subclass's) items through ``dict``'s own method (a subclass's
    ``items`` or ``__iter__`` never runs: R57a-3); anything else: no items (its reader marks
    it, :func:`_own_items`). An ``OrderedDict`` in its own order (``move_to_end`` changes
    it, the plain dict's does not: R57c-2), through its C key view."""
    if not issubclass(type(d), dict):
        return []
    if issubclass(type(d), collections.OrderedDict):
        return [(k, dict.__getitem__(d, k)) for k in collections.OrderedDict.keys(d)]
    return list(dict.items(d))


def _base_iter(v: Any) -> Any:
    """``v``'s elements through its base container type's own ``__iter__`` (list, tuple, set,
    frozenset: a subclass's ``__iter__`` never runs, R57a-3's family)."""
    base = next(b for b in (list, tuple, set, frozenset) if issubclass(type(v), b))
    return base.__iter__(v)


def _plain(k: Any) -> str:
    """A key as a set or a prefix test may see it: a ``str`` itself, anything else a text no
    skipped name has (a str subclass's own ``__hash__``, ``__eq__`` or ``startswith`` is never
    called: R56d-2's family)."""
    return k if type(k) is str else "<not a str>"


def _own_items(v: Any, where: str, out: dict[str, str]) -> list[tuple[Any, Any]]:
    """The items of ``v``'s own ``__dict__`` (:func:`own_dict`); one whose class defines
    ``__dict__`` otherwise is unreadable: ``out[where + " __dict__"]`` says so (UNKNOWN)."""
    d = own_dict(v)
    if d is None:
        out[f"{where} __dict__"] = UNREADABLE + f"{_qual(type(v))} defines its own __dict__"
        return []
    return _items(d)


# a class made by a class statement or ``type()``: a heap type (Py_TPFLAGS_HEAPTYPE) that is not
# immutable (Py_TPFLAGS_IMMUTABLETYPE, which C extensions' heap types set: ``functools.partial``'s
# members include ``__vectorcalloffset__``, a C function's address)
TPFLAGS_HEAPTYPE, TPFLAGS_IMMUTABLETYPE = 1 << 9, 1 << 8


def _slots(v: Any) -> list[tuple[str, Any]]:
    """The slots of ``v``'s Python classes that hold a value, by the member descriptors in
    each class's own namespace (a private slot under its mangled name, R10-3), read through
    the descriptor: neither the class's ``__slots__`` attribute, which the user can rebind,
    nor the value's own ``__getattribute__`` is consulted (R57b-3)."""
    out = []
    for cls in type.__dict__["__mro__"].__get__(type(v)):
        if type.__dict__["__flags__"].__get__(cls) & (TPFLAGS_HEAPTYPE | TPFLAGS_IMMUTABLETYPE) \
                != TPFLAGS_HEAPTYPE:
            continue
        found = set()
        for at, d in list(dict.items(type.__dict__["__dict__"].__get__(cls).copy())):
            if type(d) is types.MemberDescriptorType and type(at) is str \
                    and d.__objclass__ is cls and at not in ("__dict__", "__weakref__"):
                if at != d.__name__ or at in found:   # an alias of another slot (R57d-1)
                    raise SlotsUnreadable(cls)
                found.add(at)
                try:
                    out.append((at, d.__get__(v, type(v))))
                except AttributeError:      # an empty slot
                    continue
        # a slot whose descriptor left its class (R57c-5; a class that declared slots: a C
        # extension's heap type, pybind11's, is larger than its base for its own C fields)
        # (exactly as many: a count off either way is a layout not understood, R58a-3)
        if (found or "__slots__" in type.__dict__["__dict__"].__get__(cls)) \
                and len(found) != _slot_count(cls):
            raise SlotsUnreadable(cls)
    return out


class SlotsUnreadable(Exception):
    """A class's instances have more slots than its namespace has descriptors for."""


def _slot_count(cls: type) -> int:
    """How many slots ``cls`` adds to its base's layout (its size less the base's, less the
    ``__dict__`` and ``__weakref__`` pointers it adds inside the object: a ``__dict__`` kept
    before the object, Python 3.11's managed dict, has a negative offset and takes no room,
    R58a-3), read through ``type``'s own members; -1 for a layout that is not whole pointers."""
    def get(name: str, c: type) -> Any:
        return type.__dict__[name].__get__(c)

    base = get("__base__", cls)
    extra = get("__basicsize__", cls) - get("__basicsize__", base)
    for name in ("__dictoffset__", "__weakrefoffset__"):
        if get(name, cls) > 0 and not get(name, base):
            extra -= struct.calcsize("P")
    if extra < 0 or extra % struct.calcsize("P"):
        return -1
    return extra // struct.calcsize("P")
