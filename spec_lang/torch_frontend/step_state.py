"""Everything in Python a training step changes besides its traced tensors (adversarial rounds
6 and 7, ``tests/adversarial/ATTEMPTS.md``: findings R6-1, R7-1, R7-3).

``make_fx`` records the step's tensor program; the goals compare what it computes. A step can
also change Python state that the *next* step reads: a module attribute (``self._scale``, an
instance ``forward``, an activation function), the optimizer object (an instance ``step``, a
step hook), a module-level global of the train file, a global hook registry, the default dtype,
the CPU generator. Round 6 listed such places one by one and round 7 found the next ones; this
module takes them as a class: it fingerprints *all* of that state before and after
``train_step`` and reports what changed, so that :mod:`spec_lang.torch_frontend.leftover`
compares the changes of the single-device step with those of every traced rank.

The fingerprint of a value is identity-free text (so that it means the same in the spec's and in a
rank's tracing process): typed values for numbers and strings (``numpy`` scalars too: finding R7-2),
a function by its module, qualified name, code, defaults and closure, an object by its class and its
attributes, recursively; a module or the optimizer met inside a value by its name; the parameters,
buffers, gradients and optimizer state tensors (the goals) by ``<goal tensor>``. A value whose new
content cannot be compared between processes (another tensor, a Python function the step leaves
behind: what it reads when called is not in its text, R8-3) is marked :data:`UNCOMPARABLE`: a step
that changes it is UNKNOWN, never EQUIVALENT (so a held tensor's storage is named by its address,
which only this process compares: R55a-3). A value that cannot be read at all (an object without
attributes, a numpy object array, over :data:`_NODE_BUDGET` values) is :data:`UNREADABLE`: UNKNOWN
whether or not the step changed it (R8-1). Values whose state is not in attributes are read by
content (``special_values.special_text``); torch's own objects by their public plain attributes only.
Process-wide state (the environment, ``builtins``, numpy's global generator, every loaded torch
module's globals) is fingerprinted too (R8-2, R9-2); Python's ``random`` generator is not (torch's
distributed calls draw from it in the parallel step), which the verdict states.
"""

from __future__ import annotations

import collections
import enum
import functools
import gc
import hashlib
import os
import sys
import types
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.held_storage import (data_digest, fake_constant, goal_storages,
                                                   storage_no, storages)
from spec_lang.torch_frontend.process_state import (  # noqa: F401 -- re-exported
    MODULE_DUNDERS, OTHER_MODULE, THREADS, TORCH_FINALIZER, TORCH_MODULE, UNCOMPARABLE,
    UNREADABLE, _cell,
    _base_iter, _items, _own_items, _plain, _slots, module_dict, own_dict,
    _digest, _dynamo_cache, _is_torch, _is_torch_module, _process_state, _qual, dunder_text,
    _LOGGER_CACHES, _TRACER_STATE, _logger_links, key_text, prim_repr,
    release_kept)
from spec_lang.torch_frontend.abc_registry import abc_registry
from spec_lang.torch_frontend.c_registries import ATEXIT, imported_in_step
from spec_lang.torch_frontend.op_namespaces import torch_namespace
from spec_lang.torch_frontend.own_guards import ours as _ours
from spec_lang.torch_frontend.special_values import special_text
from spec_lang.torch_frontend.value_text import (TPFLAGS_HEAPTYPE, TPFLAGS_IMMUTABLETYPE,
                                                 SlotsUnreadable, _name, _type_module,
                                                 trained_objects)
from spec_lang.torch_frontend.registry_state import import_made
from spec_lang.torch_frontend.op_namespaces import NAMESPACE_FILLS, fills_dropped
from spec_lang.torch_frontend.wrapper_names import is_checkpoint_wrapper

# torch's readers, bound before the train file can replace them (R61a-4's family: a step counter
# kept in the CPU generator behind a ``torch.get_rng_state`` patched at import): C functions
# and the CPU generator's own methods, not ``torch``'s module attributes
_DEFAULT_DTYPE = torch.get_default_dtype
_GRAD_ENABLED = torch.is_grad_enabled
_RNG_STATE = torch._C.default_generator.get_state  # noqa: SLF001
_INITIAL_SEED = torch._C.default_generator.initial_seed  # noqa: SLF001
_TO_NUMPY = torch._C.TensorBase.numpy  # noqa: SLF001
_SHA1 = hashlib.sha1
_FUNC_GLOBALS = types.FunctionType.__globals__.__get__
_BUILTINS = sys.modules["builtins"]
_BUILTINS_DICT = vars(_BUILTINS)
from torch.utils._python_dispatch import _disable_current_modes as _NO_MODES  # noqa: E402

__all__ = ["UNCOMPARABLE", "UNREADABLE", "step_state", "state_changes"]

_NODE_BUDGET = 500_000      # values visited per entry before it is "too large" to compare
_PRIMITIVES = (bool, int, float, complex, str, bytes)
_IMMUTABLE_TYPES = (type(None), *_PRIMITIVES, torch.device, torch.dtype)
# what every Enum member has: its own attributes are the rest (R10-2)
_ENUM_OWN = frozenset({"__objclass__", "_sort_order_", "__init__"})
_SKIPPED_MODULE_KEYS = frozenset({"_parameters", "_buffers", "_modules", "training"})


# C types whose instances keep all their state in their ``__dict__``
_DICT_ONLY = (object, types.SimpleNamespace)
_GLOBAL_REGISTRIES = ("torch.nn.modules.module", "torch.optim.optimizer")
# torch's objects that hold training state a user reads and changes: read in full
_TORCH_STATE = ("torch.optim", "torch.nn.modules", "torch.nn.parameter", "torch.utils.hooks")


class _TooLarge(Exception):
    pass


class _Encoder:
    """Identity-free text of one entry's value (module docstring)."""

    def __init__(self, names: Mapping[int, str], goals: frozenset[int],
                 user: frozenset[str] = frozenset(), stale: Mapping[int, str] | None = None,
                 goal_storages: Mapping[int, str] | None = None,
                 module_globals: frozenset[int] | None = None):
        self.names, self.goals, self.user = names, goals, user   # user: the user's modules
        # ids of the namespaces read as modules' (None: the loaded modules'; those of modules
        # imported while reading added when met: ``_globals``)
        self.module_globals = set(module_namespaces(()) if module_globals is None
                                  else module_globals)
        self.goal_storages = goal_storages or {}    # a goal's storage -> its name (R54c-3)
        self.stale = stale or {}    # id of a tensor the traced step replaced -> its name
        self.held: list[str] = []   # the stale ones met (R44c-5)
        self.seen: dict[int, int] = {}
        self.kept: list[Any] = []   # what ``seen`` names, alive until the entry is read
        self.nodes = 0
        self.uncomparable = False
        self.unreadable = False

    def enc(self, v: Any) -> str:  # noqa: PLR0911, PLR0912, C901 -- one case per kind of value
        self.nodes += 1
        if self.nodes > _NODE_BUDGET:
            raise _TooLarge
        if v is None:
            return "None"
        if issubclass(type(v), enum.Enum):     # a member's own attributes too (R10-2), its
            # name and value among them (its class's own ``__repr__`` never runs: R57b-2)
            return f"enum:{_qual(type(v))}" + self._attrs(v, skip=_ENUM_OWN)
        for base in _PRIMITIVES:
            if issubclass(type(v), base):
                extra = "" if type(v) is base else self._attrs(v)
                return f"{_qual(type(v))}:{prim_repr(base, v)}{extra}"
        special = special_text(self, v)
        if special is not None:
            return special
        if id(v) in self.names:
            return self.names[id(v)]
        if v is _BUILTINS_DICT:    # (an ``exec`` namespace's ``__builtins__``: the "builtins"
            return "<builtins>"    # entry reads it, as a module by its name: round 65d r65d_06)
        if issubclass(type(v), torch.Tensor):
            if id(v) in self.goals:
                skip, const = fake_constant(v)   # a fake tensor's real value: by kind only
                return "<goal tensor>" + self._attrs(v, skip=skip) + const   # R11-6, R54b-2
            base = v._base if issubclass(type(v._base), torch.Tensor) else None  # a view (R45a-3)
            if id(v) in self.stale or id(base) in self.stale:
                self.held.append(self.stale.get(id(v)) or f"{self.stale[id(base)]} (a view)")
            self.uncomparable = True       # its values are not traced: a change is UNKNOWN
            # a plain meta tensor (an EMA copied on meta in parallelize) has no values (every
            # read of it in a trace is an Opaque constant: deep_copies, R46f-5), but its
            # version counter is state the next step can read past any guard
            # (``torch._C.TensorBase.__dict__["_version"]``): it counts (R53b-3)
            ver = f",v{v._version}"
            # its flags and Python attributes too: a step counter kept there (R53b-1)
            # and its type, its storage object's attributes and its bytes (R53c-1, -2, -3)
            # and which storage it shares with the other held tensors (R54b-1)
            return f"tensor({_qual(type(v))},{tuple(v.shape)},{v.dtype},{v.device}{ver}," \
                   f"rg={v.requires_grad},g={self.enc(v._grad)},d={data_digest(v)}," \
                   f"h={self.enc((v._backward_hooks, v._post_accumulate_grad_hooks))}," \
                   f"s{storage_no(v, self.goal_storages)})" \
                + self._attrs(v) + "".join(map(self._attrs, storages(v)))   # all (R55c-7)
        if type(v) in (torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format):
            return repr(v)      # (a subclass of torch.Size is read as a tuple, with its attributes)
        if issubclass(type(v), types.ModuleType):
            name = module_dict(v).get("__name__")
            if type(name) is str and sys.modules.get(name) is v:
                return f"module:{name}"
            # a module not in sys.modules (a copy): its namespace (R57b-1)
            return f"module-copy:{key_text(name)}" + self.enc(dict(module_dict(v)))
        if type(v) is types.GenericAlias:    # ``dict[str, Any]`` (an annotation of torch's
            # checkpoint wrapper's hooks: round 38e, r38e_10); immutable, its attribute reads
            # are its origin class's (exactly the type: a subclass holds state, R39a-4)
            star = "*" if v.__unpacked__ else ""      # ``*tuple[float]`` is another (R39c-2)
            return f"alias:{star}{self.enc(v.__origin__)}[" + ",".join(
                self.enc(a) for a in v.__args__) + "]"
        key = id(v)
        if key in self.seen:
            return f"ref#{self.seen[key]}"
        self.seen[key] = len(self.seen)
        self.kept.append(v)     # (alive until the entry is read: a class's body dict or a
        #                         function's cells are made here, and a later one made at a
        #                         freed one's address was read as "ref#": R65-L1)
        # (a container subclass is read through its base type's own methods, never its own
        # ``__iter__`` / ``items``: R57a-3's family)
        if issubclass(type(v), (list, tuple)):
            return f"{_qual(type(v))}[" + ",".join(self.enc(x) for x in _base_iter(v)) + "]" \
                + self._attrs(v)
        if issubclass(type(v), (set, frozenset)):
            return f"{_qual(type(v))}{{" + ",".join(sorted(self.enc(x) for x in _base_iter(v))) \
                + "}" + self._attrs(v)
        if issubclass(type(v), dict):
            return f"{_qual(type(v))}{{" + ",".join(f"{self.enc(k)}:{self.enc(x)}"
                                                   for k, x in _items(v)) + "}" + self._attrs(v)
        if issubclass(type(v), functools.partial):   # (partial's own members: R57b-2)
            base = next(b for b in type(v).__mro__ if b.__name__ == "partial"
                        and _type_module(b) in ("functools", "_functools"))
            func, args, kw = (base.__dict__[a].__get__(v) for a in ("func", "args", "keywords"))
            return f"partial({self.enc(func)},{self.enc(args)},{self.enc(kw)})" + self._attrs(v)
        if issubclass(type(v), types.MethodType):
            return f"method({self.enc(v.__func__)},{self.enc(v.__self__)})"
        if issubclass(type(v), types.FunctionType):
            if not _is_torch_module(_name(v.__module__)):
                # what a function the step leaves behind does when the next step calls it (read
                # the rank, ...) is not in its text: a change to one is not compared (R8-3)
                self.uncomparable = True
            return self._function(v)
        if issubclass(type(v), type):
            if _trusted_class(v):
                return f"class:{_qual(v)}"
            # an abstract class by its registry, wherever it is reached (a method's
            # ``super()`` cell: R39a-6), as in the module's class chain
            body = {k: (abc_registry(v, self.user) if _plain(k) == "_abc_impl" else x)
                    for k, x in vars(v).items() if _plain(k) not in ("__dict__", "__weakref__",
                                                             "__doc__")}
            return f"class:{_qual(v)}{self.enc(body)}"
        if issubclass(type(v), (types.BuiltinFunctionType, types.BuiltinMethodType,
                          types.WrapperDescriptorType, types.MethodWrapperType,
                          types.MethodDescriptorType)):
            owner = getattr(v, "__self__", None)
            bound = "" if owner is None or issubclass(type(owner), types.ModuleType) \
                else f"@{self.enc(owner)}"
            return f"builtin:{_name(getattr(v, '__module__', ''))}." \
                   f"{_name(getattr(v, '__qualname__', ''))}" \
                   + bound
        if _is_torch_module(_type_module(type(v))) and _trusted_class(type(v), _is_torch_module) \
                and not _type_module(type(v)).startswith(_TORCH_STATE):
            # torch's own objects (a DeviceMesh, a process group): their public plain
            # attributes only (module docstring); the trace's fake mode and its converters in
            # full, but for their memo tables and the capture's guards (R55a-2, R55b-1: the
            # user's code reaches the mode through a parameter's ``fake_mode``, a real run's
            # parameter has none: a counter kept there is state only the trace has)
            deep = _TRACER_STATE.get(f"{_type_module(type(v))}."
                                     f"{type.__dict__['__name__'].__get__(type(v))}")
            if deep is not None:
                return f"{_qual(type(v))}" + self._attrs(v, skip=deep | _ours(v))
            return f"{_qual(type(v))}" + self._attrs(v, public_plain=True)
        c_state = next((c for c in type(v).__mro__ if c not in _DICT_ONLY and (
            type.__dict__["__flags__"].__get__(c) & (TPFLAGS_HEAPTYPE | TPFLAGS_IMMUTABLETYPE))
            != TPFLAGS_HEAPTYPE), None)
        if c_state is not None:     # state in a C base its ``__dict__`` does not hold (R57c-3:
            self.uncomparable = self.unreadable = True      # a staticmethod's function, a
            return f"<{_qual(type(v))}: state in C ({_qual(c_state)})>"   # file's position)
        if own_dict(v) is not None or any(    # (no code of the value's runs: R57b-3)
                "__slots__" in type.__dict__["__dict__"].__get__(c) for c in type(v).__mro__):
            return f"{_qual(type(v))}" + self._attrs(v)
        # no attributes to read (a generator, a C object): whether the step changed it is not
        # known, changed or not (adversarial finding R8-1)
        self.uncomparable = self.unreadable = True
        return f"<opaque {_qual(type(v))}>"

    def _attrs(self, v: Any, public_plain: bool = False, skip: frozenset[str] = frozenset()
               ) -> str:
        d = own_dict(v)     # (never a ``__dict__`` of the value's own: R57a-3)
        out = dict(_items(d)) if d is not None else {}
        try:
            for at, x in _slots(v):
                out.setdefault(at, x)
        except SlotsUnreadable:        # (R57c-5)
            self.uncomparable = self.unreadable = True
            return f"<slots of {_qual(type(v))} not all readable>"
        out = {k: x for k, x in out.items() if _plain(k) not in skip}
        if public_plain:
            out = {k: x for k, x in out.items() if not _plain(k).startswith("_")
                   and (x is None or issubclass(type(x), _PRIMITIVES))}
        return "" if not out else "(" + ",".join(f"{key_text(k)}={self.enc(x)}"
                                                 for k, x in out.items()) + ")"

    def _function(self, f: types.FunctionType) -> str:
        code = f.__code__
        cells = tuple(_cell(c) for c in (f.__closure__ or ()))
        return (f"fn:{_name(f.__module__)}.{f.__qualname__}:{self._code(code)}"
                f":{self.enc(f.__defaults__)}:{self.enc(f.__kwdefaults__)}:{self.enc(cells)}"
                f"{self._attrs(f, skip=_dynamo_cache(f))}{self._globals(f)}")

    def _globals(self, f: types.FunctionType) -> str:
        """A function's globals when no module's entry reads them: a function of a second
        copy of a library's file (R64d-3: its module dict in no ``sys.modules`` entry, where
        the step kept a counter), of ``exec(code, {})``; in full, as any dict, but for
        ``__builtins__`` when it is the builtins module or its namespace (read as the
        "builtins" entry; ``exec`` puts the namespace there)."""
        g = _FUNC_GLOBALS(f)
        if id(g) in self.module_globals:
            return ""
        self.module_globals.update(module_namespaces(()))   # (a module imported since: R65c-1's
        if id(g) in self.module_globals:                     # fix met op_guard's that way)
            return ""
        if id(g) in self.seen:          # (functions sharing the globals: read once)
            return f":globals=ref#{self.seen[id(g)]}"
        self.seen[id(g)] = len(self.seen)
        self.kept.append(g)
        return f":globals={_qual(type(g))}{{" + ",".join(
            f"{self.enc(k)}:" + ("<builtins>" if type(k) is str and k == "__builtins__" and (
                x is _BUILTINS or x is _BUILTINS_DICT) else self.enc(x))
            for k, x in _items(g)) + "}" + self._attrs(g)

    def _code(self, code: types.CodeType) -> str:
        consts = tuple(self._code(c) if issubclass(type(c), types.CodeType) else c
                       for c in code.co_consts)
        raw = repr((code.co_code, code.co_names, code.co_varnames, code.co_filename,
                    code.co_firstlineno)).encode() + self.enc(consts).encode()
        return hashlib.sha1(raw).hexdigest()[:16]  # noqa: S324 -- a digest, not security


def _short_type(full: str) -> str:
    i = full.find("<opaque ")
    if i >= 0:
        return full[i + 1:full.find(">", i)]
    i = full.find("<numpy object array")
    return "a numpy object array" if i >= 0 else "a value it cannot read"


def _text(enc: _Encoder, v: Any) -> str:
    """One entry: readable when it is a plain value, else a digest of its full text."""
    enc.seen.clear()
    enc.kept.clear()
    enc.nodes, enc.uncomparable, enc.unreadable = 0, False, False
    try:
        full = enc.enc(v)
    except (_TooLarge, RecursionError):
        return f"{UNREADABLE}<too large to compare: {type(v).__name__}>"
    if enc.unreadable:
        return f"{UNREADABLE}<holds {_short_type(full)}>"
    mark = UNCOMPARABLE if enc.uncomparable else ""
    if len(full) <= 80:
        return mark + full
    digest = hashlib.sha1(full.encode()).hexdigest()[:16]  # noqa: S324 -- a digest
    return f"{mark}<{type(v).__name__} #{digest}>"


_PARAMETER_HOOKS = ("_backward_hooks", "_post_accumulate_grad_hooks")


class _Entries(dict):
    """A fingerprint's entries by name. A name written twice is two states spelled alike (an
    optimizer attribute ``"param_groups[0]"``, a module key ``"0.cnt"`` beside submodule 0's
    ``cnt``: R58c-3), so it is unreadable from then on, never one entry hiding the other."""

    def __setitem__(self, key: str, value: str) -> None:
        if dict.__contains__(self, key):
            value = UNREADABLE + f"two entries are named {key!r}"
        dict.__setitem__(self, key, value)


def _trusted_class(c: type, names: Any = _is_torch) -> bool:
    """``c`` is the class its ``__module__`` names (``names``: torch's, or also the standard
    library's few trusted ones) and holds under its ``__qualname__`` (looked up through the
    namespaces' own dicts), and it existed before the train file ran (the capture's baseline,
    ``op_guard``; a static type: by its C name alone). Not a class of a module imported since:
    the train file can import one and bind its own class in it (R58c-1). ``__module__`` is a
    writable string, and the train file's own class naming ``collections`` or ``torch.nn`` was
    read by that name alone, its body or private attributes unread (R58b-4)."""
    from spec_lang.torch_frontend.op_guard import current_baseline  # noqa: PLC0415

    mod = type.__dict__["__module__"].__get__(c)
    if type(mod) is not str or not names(mod):
        return False
    if not type.__dict__["__flags__"].__get__(c) & TPFLAGS_HEAPTYPE:
        return True         # a static type: its module is in its C name, not writable
    m = dict.get(sys.modules, mod)
    if not issubclass(type(m), types.ModuleType):
        return False
    ns: Any = module_dict(m)
    found: Any = None
    for part in type.__dict__["__qualname__"].__get__(c).split("."):
        found = dict.get(ns, part) if type(ns) is dict else \
            types.MappingProxyType.get(ns, part) if type(ns) is types.MappingProxyType else None
        if not issubclass(type(found), type):
            return False
        ns = type.__dict__["__dict__"].__get__(found)
    return found is c and id(c) in current_baseline().types


def module_namespaces(user_modules: Iterable[types.ModuleType]) -> frozenset[int]:
    """The ids of the namespaces read as modules': the user's modules' (by :func:`step_state`)
    and every other loaded module's (by ``_process_state``, which reads ``torch.ops`` and
    ``torch.classes`` by their data only); a function's globals that are none of them are
    read with it (R64d-3)."""
    return frozenset(id(module_dict(m)) for m in user_modules) | frozenset(
        id(module_dict(m)) for k, m in list(dict.items(sys.modules))    # (a key's own __eq__
        if issubclass(type(m), types.ModuleType) and not torch_namespace(k, m))  # never runs)


def step_state(model: nn.Module, opt: torch.optim.Optimizer,
               user_modules: Iterable[types.ModuleType], ours: Iterable[Any] = (),
               base_keys: Mapping[int, Mapping[str, Any]] | None = None,
               buffers: Mapping[str, Any] | None = None, mesh: Any = None,
               stale: Mapping[int, str] | None = None, site: str = "<train file>:1"
               ) -> dict[str, str]:
    """Entry name -> fingerprint of all the Python state a step could leave for the next one
    (module docstring): every attribute of every module (its parameter, buffer and submodule
    *names* included), each parameter's attributes (hooks), every attribute of the optimizer
    (its hooks, an instance ``step``, ``param_groups``, the non-tensor part of ``state``), the
    globals of the train file and of the modules next to it, torch's global hook registries,
    the default dtype, grad mode and the CPU generator's state. ``ours``: objects the capture
    itself put there (the data-parallel stand-ins' units, the wrapper of ``opt.step``), read
    as ``<shardproof>``; ``base_keys``: id of a parameter -> the attributes it was created
    with, and their values (the tracer's own: not read while they hold the very object they
    were created with, R54c-1; its hook dicts always read); ``buffers``: name -> the buffer
    tensor the capture put in the model, read as ``<buffer name>`` wherever it is held (a
    pipeline stage holding the model's buffer as a plain attribute: its value is a goal);
    ``mesh``: the ``DeviceMesh`` given to the step, every attribute of it (torch's private ones
    too: a cache the train file keeps on the mesh, adversarial round 26; its submeshes are new
    objects at every ``mesh[name]``); ``stale``: id -> name of the parameters and buffers the
    model held before the capture put the traced ones in their places (see Raises).

    Raises:
        PlanError: any of that state (a module attribute, a global, a closure, the optimizer's
            parameter groups) holds one of the ``stale`` tensors: the step is traced on fresh
            parameters, so identity with such a reference, or its values, are not what the
            real step sees (round 44c, R44c-5: ``self.refs = [self.w2.weight]`` compared by
            identity in the forward was EQUIVALENT on a wrong FSDP2 plan), naming the entry
            and the parameter at ``site``."""
    base_keys = base_keys or {}
    stale = stale or {}
    gc.collect()    # a finalizer or __del__ of the step's garbage runs now, not after (R10-5)
    names: dict[int, str] = {id(x): "<shardproof>" for x in ours}
    for n, m in model.named_modules(remove_duplicate=False):
        names.setdefault(id(m), f"<module {n or '<model>'}>")
    names[id(opt)] = "<optimizer>"
    pnames = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    named: list[tuple[str, Any]] = []      # the goal tensors, by name
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), f"<parameter {n}>")
        named += [(n, p)] + ([(f"{n}.grad", p.grad)] if p.grad is not None else [])
    bnamed = [*(buffers or {}).items(), *model.named_buffers(remove_duplicate=False)]
    for n, b in bnamed:
        names.setdefault(id(b), f"<buffer {n}>")
    for p, st in _items(opt.state):
        named += [(f"optimizer.state[{pnames.get(id(p), '<other>')}][{k}]", x)
                  for k, x in _items(st) if issubclass(type(x), torch.Tensor)]
    user_modules = list(user_modules)
    user_names = frozenset(m.__name__ for m in user_modules)
    enc = _Encoder(names, frozenset(id(x) for _, x in named), user_names, stale,
                   goal_storages(named + [(f"<buffer {n}>", b) for n, b in bnamed]),  # R55a-4
                   module_namespaces(user_modules))
    out: dict[str, str] = _Entries()
    held: list[tuple[str, str]] = []    # (entry, stale tensor's name)

    def put(key: str, v: Any) -> None:
        out[key] = _text(enc, v)
        held.extend((key, n) for n in enc.held)
        enc.held.clear()

    for n, m in model.named_modules(remove_duplicate=False):
        where = n or "<model>"
        out[f"module {where} parameters"] = ",".join(
            f"{key_text(k)}={pnames.get(id(p), '<other>') if p is not None else None}"
            for k, p in _items(m._parameters))  # noqa: SLF001
        out[f"module {where} buffers"] = ",".join(  # noqa: SLF001
            key_text(k) for k, _ in _items(m._buffers))  # noqa: SLF001
        out[f"module {where} submodules"] = ",".join(  # noqa: SLF001
            key_text(k) for k, _ in _items(m._modules))  # noqa: SLF001
        for k, v in _own_items(m, f"module {where}", out):
            if _plain(k) not in _SKIPPED_MODULE_KEYS:
                put(f"module {where}.{key_text(k)}", v)
        if is_checkpoint_wrapper(m):
            # its own flag, which nothing of torch reads and the leftover state does not
            # compare (its block's is): a step changing it is reported (R39a-5)
            out[f"module {where}.training (torch's checkpoint wrapper)"] = repr(m.training)
        # its classes' attributes (a class built locally: R9-3), each under its place in the
        # chain (two classes of one name: R58c-2), read through type's own descriptors
        for i, cls in enumerate(type.__dict__["__mro__"].__get__(type(m))):
            if cls is not object and not _trusted_class(cls, _is_torch_module):
                put(f"module {where} class {i} {type.__dict__['__qualname__'].__get__(cls)}",
                    {k: (abc_registry(cls, enc.user) if _plain(k) == "_abc_impl" else x)
                     for k, x in type.__dict__["__dict__"].__get__(cls).items()
                     if _plain(k) not in ("__dict__", "__weakref__", "__doc__")})
    for n, p in model.named_parameters(remove_duplicate=False):
        base = base_keys.get(id(p), {})   # a user value under a creation key counts (R54b-2)
        own = {k: x for k, x in _own_items(p, f"parameter {n}", out)  # its fake_mode (R55a-2)
               if _plain(k) not in base or base[k] is not x
               or not issubclass(type(x), _IMMUTABLE_TYPES)}
        # C attributes; no hook left is none (an emptied dict: round 48a, R48a-3)
        own.update({k: getattr(p, k, None) or None for k in _PARAMETER_HOOKS})
        put(f"parameter {n} attributes", own)
    for k, v in _own_items(opt, "optimizer", out):
        if _plain(k) == "state":      # (a key's own __eq__ is never called: R56d-2)
            for p, st in _items(v):
                if id(p) in stale:
                    held.append(("optimizer.state", stale[id(p)]))
                put(f"optimizer.state[{pnames.get(id(p), '<other>')}]", dict(_items(st)))
        elif _plain(k) != "param_groups":
            put(f"optimizer.{key_text(k)}", v)
    for i, g in enumerate(opt.param_groups):
        held.extend((f"optimizer.param_groups[{i}]['params']", stale[id(p)])
                    for p in g.get("params", ()) if id(p) in stale)
        put(f"optimizer.param_groups[{i}]",
            {k: ([pnames.get(id(p), "<other>") for p in x] if k == "params" else x)
             for k, x in _items(g)})
    if mesh is not None:
        for k, v in _own_items(mesh, "the DeviceMesh", out):
            put(f"the DeviceMesh's {key_text(k)}", v)
    used: set[str] = set()
    for mod in user_modules:
        where = os.path.basename(getattr(mod, "__file__", None) or mod.__name__)
        if where in used:        # one file imported under two names (R8-1): keep both apart
            where = f"{where} (as {mod.__name__})"
        used.add(where)
        for k, v in list(module_dict(mod).items()):    # its __x__ globals too (R56a-2)
            if _plain(k) in MODULE_DUNDERS:
                if (t := dunder_text(k, v)) is not None:
                    out[f"the global {k} of {where}"] = t
            else:       # a key's own __format__ is never called (R56d-2)
                put(f"the global {key_text(k)} of {where}", v)
    # the values the interpreter calls for the step (signal handlers, finalizers, exit
    # callbacks) are read in full, but the model's, the optimizer's and these goal tensors by
    # name, as here (value_text.deep_text: a checkpoint-on-SIGTERM partial; R59c-1)
    with trained_objects([*names, *(id(x) for _, x in named)]):
        state = _process_state({m.__name__ for m in user_modules},
                               {f for m in user_modules
                                if isinstance(f := getattr(m, "__file__", None), str)},
                               user_ids=frozenset(id(m) for m in user_modules))
    for k, t in state.items():
        out[k] = t      # (one by one: a name the model's entries took too is unreadable)
    for modname in _GLOBAL_REGISTRIES:
        mod = sys.modules.get(modname)
        for k, v in (vars(mod).items() if mod is not None else ()):
            if _plain(k).startswith("_global_") and issubclass(type(v), dict):   # (R56e-5)
                put(f"torch {modname}.{k}", v)
    out["torch default dtype"] = repr(_DEFAULT_DTYPE())
    out["torch grad mode"] = repr(_GRAD_ENABLED())
    with _NO_MODES():   # read outside make_fx's tracing modes
        out["torch CPU generator"] = _SHA1(  # noqa: S324 -- a digest
            _TO_NUMPY(_RNG_STATE()).tobytes()).hexdigest()[:16]
        # the seed is readable state a later step can branch on (R11-2): not exempt from the
        # both-alike rule as the generator's draws are
        out["torch's seed (torch.initial_seed)"] = str(_INITIAL_SEED())
    if held:
        entry, name = held[0]
        raise PlanError(f"{site}: {entry} holds the {name} object the model had before the "
                        "step: prove --torch traces the step on fresh parameters and buffers, "
                        "so an identity test against such a reference, or a value read "
                        "through it, is not what the real step sees (R44c-5); look parameters "
                        "up through their module (self.w2.weight) or model.named_parameters() "
                        "when you need them")
    return dict(out)


def state_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """Entry -> its value after the step, for every entry the step changed, added
    (``<new>`` before) or removed (``<removed>``), and every entry that cannot be read
    (:data:`UNREADABLE`: whether the step changed it is not known, R8-1). A torch module
    imported during the step is not an addition, nor is any other module (torch imports
    lazily, on one side only; their globals start from their import state, a stated
    assumption), nor what such an import registers with an abstract class or puts into
    ``sys.modules`` (:func:`registry_state.import_made`); any other ``sys.modules`` entry the
    step adds is (R40b-5), and so is any other registration (R40b-2)."""
    modules = (TORCH_MODULE, OTHER_MODULE)
    exempt = import_made(before, after, modules)    # ABC registries, sys.modules (R40b)
    out = {k: v for k, v in after.items() if (before.get(k) != v or v.startswith(UNREADABLE))
           and not (k.startswith((*modules, TORCH_FINALIZER)) and k not in before)
           and k not in exempt}
    # (torch's own finalizers made or run in the step are no change, one changed is: R58f-1)
    out.update({k: "<removed>" for k in before if k not in after
                and not k.startswith(TORCH_FINALIZER)})
    out.update({k: v for k, v in before.items() if v.startswith(UNREADABLE) and k not in out})
    if ATEXIT in out and imported_in_step(before.get(ATEXIT, ""), after.get(ATEXIT, ""), lambda m: (
            TORCH_MODULE + m not in before and OTHER_MODULE + m not in before
            and (TORCH_MODULE + m in after or OTHER_MODULE + m in after))):
        del out[ATEXIT]     # exit callbacks of modules torch imported in the step only
    if NAMESPACE_FILLS in out and not fills_dropped(before.get(NAMESPACE_FILLS, ""),
                                                    out[NAMESPACE_FILLS]):
        del out[NAMESPACE_FILLS]    # torch's lazy fills only add (R66a-3)
    release_kept()     # the objects whose identities the texts name (R56b-2)
    if THREADS in out:       # threads the step started and left running (R10-5); one that
        #                      ends during the step changes nothing later (under load, a
        #                      thread of the import can end during the step)
        started = collections.Counter(after.get(THREADS, "").split("|")) - \
            collections.Counter(before.get(THREADS, "").split("|"))
        if started:
            out[THREADS] = "|".join(sorted(started.elements()))
        else:
            del out[THREADS]
    return out
