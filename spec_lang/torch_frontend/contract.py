"""What a ``prove --torch`` file provides (``docs/torch.md``, "The contract").

A train file is an ordinary PyTorch file. It defines, at module level:

=================== ========================================================================
``MESH``            ``{"dp": 2, "tp": 4}``: mesh axes, outer to inner, and their sizes.
``SIZES``           ``{"batch": 8, "seq": 2048, ...}``: the model's named, independent sizes at
                    their real values. The front end also builds the model at *probe* sizes (a
                    distinct prime per name) to read every tensor dim back as named dims.
``build_model``     ``build_model(sizes) -> nn.Module``: the single-device model at ``sizes``.
``make_batch``      ``make_batch(sizes) -> dict[str, Tensor]``: one global batch (only shapes
                    and dtypes are read; integer tensors are indices, bool tensors masks).
``build_optimizer`` ``build_optimizer(model) -> torch.optim.Optimizer`` (AdamW, Adam or SGD;
                    parameter groups allowed).
``parallelize``     ``parallelize(model, mesh) -> nn.Module``: the user's own parallelisation
                    (``parallelize_module`` styles, ``loss_parallel``...); a torchtitan user
                    calls their ``parallelize_llama``-style function here unchanged.
``train_step``      ``train_step(model, optimizer, batch, mesh) -> loss``: forward, loss,
                    ``backward``, clipping, ``optimizer.step()``; ``mesh`` is ``None`` for the
                    single-device run (the spec).
=================== ========================================================================

Optional: ``DATA_SHARDING = {"tokens": {"dp": 0}}`` (which dim of each batch input each mesh axis
splits; default: dim 0 over every axis whose name starts with ``dp``, printed as an assumption),
``OPTIMIZER_STEP = 3`` (the optimizer's step count before this iteration; default 1).

Every error is a :class:`~spec_lang.errors.PlanError` starting with ``file:line:`` (exit 3).
"""

from __future__ import annotations

import hashlib
import sys
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.caught import compile_train_file
from spec_lang.torch_frontend.module_members import register_namespace

__all__ = ["TrainFile", "read_train_file", "REQUIRED", "line_of", "user_frame"]

REQUIRED = ("MESH", "SIZES", "build_model", "make_batch", "build_optimizer", "parallelize",
            "train_step")


@dataclass(frozen=True)
class TrainFile:
    """The user's train file, executed once: its declarations and functions.

    Attributes:
        path: the file as given.
        sha256: of its bytes (the certificate's ``plan.sha256``).
        mesh: axis -> size, outer to inner.
        sizes: name -> real size.
        data_sharding: input name -> {axis: dim index} (``None``: the default).
        optimizer_step: the optimizer's step count before this iteration.
        module: the executed module (its functions are called by the capture).
        source: the bytes executed (the capture processes execute these, never the file again).
    """

    path: str
    sha256: str
    mesh: dict[str, int]
    sizes: dict[str, int]
    data_sharding: dict[str, dict[str, int]] | None
    optimizer_step: int
    module: types.ModuleType
    source: bytes = b""

    def fn(self, name: str) -> Callable[..., Any]:
        return getattr(self.module, name)


def line_of(exc: BaseException, path: str) -> int:
    """The deepest traceback line of ``exc`` inside ``path`` (1 when none)."""
    line = 1
    want = str(Path(path).resolve())
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename and str(Path(fr.filename).resolve()) == want and fr.lineno is not None:
            line = fr.lineno
    return line


def user_frame(exc: BaseException, path: str) -> str | None:
    """``"llama_model.py:101"``: the deepest traceback frame of ``exc`` in a file next to
    ``path`` (the user's model and parallelisation modules) when it is deeper than the train
    file's own deepest frame; ``None`` otherwise (the train file's line says it all)."""
    here = Path(path).resolve()
    folder = here.parent
    found: str | None = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if not fr.filename or fr.lineno is None:
            continue
        f = Path(fr.filename).resolve()
        if f == here:
            found = None
        elif f.parent == folder and f.suffix == ".py":
            found = f"{f.name}:{fr.lineno}"
    return found


def _def_line(mod: types.ModuleType, name: str, src: str) -> int:
    for i, ln in enumerate(src.splitlines(), 1):
        s = ln.lstrip()
        if s.startswith((f"{name} =", f"{name}=", f"{name}:", f"def {name}(")):
            return i
    return 1


def _sizes(v: Any, what: str, where: str, *, allow_empty: bool = False) -> dict[str, int]:
    if not isinstance(v, Mapping) or (not v and not allow_empty):
        raise PlanError(f"{where}: {what} must be a non-empty dict name -> positive int, got "
                        f"{v!r}")
    out: dict[str, int] = {}
    for k, n in v.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise PlanError(f"{where}: {what} key {k!r} must be an identifier")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise PlanError(f"{where}: {what}[{k!r}] must be a positive int, got {n!r}")
        out[k] = n
    return out


def read_train_file(path: str | Path, source: bytes | None = None) -> TrainFile:
    """Execute the train file and check the contract (see the module docstring).

    ``source``: the file's bytes as the caller read and hashed them (``prove`` reads the file
    once; the tracing processes run those bytes, under the name ``path``); ``None``: read
    ``path``.

    The file's directory is on ``sys.path`` while it runs (so ``from model import ...`` next to
    it works); the module is not left in ``sys.modules``.

    Raises:
        PlanError: unreadable file, syntax error, an exception while running it, a missing or
            malformed declaration (naming the line and what to write).
    """
    p = str(path)
    try:
        raw = Path(p).read_bytes() if source is None else source
    except OSError as e:
        raise PlanError(f"{p}:1: cannot read the train file: {e.strerror or e}") from None
    sha = hashlib.sha256(raw).hexdigest()
    src = raw.decode("utf-8", errors="replace")
    try:
        # the exceptions its code catches or swallows are recorded (caught.py: R35d-2, round 38)
        code = compile_train_file(raw, p)
    except SyntaxError as e:
        raise PlanError(f"{p}:{e.lineno or 1}: syntax error: {e.msg}") from None
    except (RecursionError, MemoryError) as e:   # too deeply nested for Python's compiler
        raise PlanError(f"{p}:1: the train file is nested too deeply for Python to compile "
                    f"({type(e).__name__}): split its longest expression") from None
    modname = f"_shardproof_torch_{sha[:16]}"
    mod = types.ModuleType(modname)
    mod.__file__ = p
    folder = str(Path(p).resolve().parent)
    sys.modules[modname] = mod
    sys.path.insert(0, folder)
    try:
        try:
            exec(code, mod.__dict__)  # noqa: S102 -- the user's train file is user code by design
        except SystemExit as e:
            raise PlanError(f"{p}:{line_of(e, p)}: the train file called sys.exit({e.code!r}) "
                            "while loading") from None
        except Exception as e:  # noqa: BLE001 -- any user error is one line with the user's line
            raise PlanError(f"{p}:{line_of(e, p)}: {type(e).__name__}: {e}") from None
    finally:
        sys.modules.pop(modname, None)
        sys.path.remove(folder)
    register_namespace(mod.__dict__)   # (read as a module's by step_state: R63d-3)
    missing = [n for n in REQUIRED if n not in mod.__dict__]
    if missing:
        raise PlanError(f"{p}:1: the train file must define {', '.join(missing)} at module level "
                        "(docs/torch.md, 'The contract')")
    for n in REQUIRED[2:]:
        if not callable(mod.__dict__[n]):
            raise PlanError(f"{p}:{_def_line(mod, n, src)}: {n} must be a function")
    mesh = _sizes(mod.MESH, "MESH", f"{p}:{_def_line(mod, 'MESH', src)}")
    sizes = _sizes(mod.SIZES, "SIZES", f"{p}:{_def_line(mod, 'SIZES', src)}")
    clash = sorted(set(mesh) & set(sizes))
    if clash:
        raise PlanError(f"{p}:{_def_line(mod, 'SIZES', src)}: SIZES and MESH share the names "
                        f"{clash}; rename the sizes")
    ds = mod.__dict__.get("DATA_SHARDING")
    where = f"{p}:{_def_line(mod, 'DATA_SHARDING', src)}"
    if ds is not None:
        if not isinstance(ds, Mapping):
            raise PlanError(f"{where}: DATA_SHARDING must be a dict input -> {{axis: dim}}")
        checked: dict[str, dict[str, int]] = {}
        for k, v in ds.items():
            if not isinstance(v, Mapping):
                raise PlanError(f"{where}: DATA_SHARDING[{k!r}] must be a dict axis -> dim index")
            for a, d in v.items():
                if a not in mesh:
                    raise PlanError(f"{where}: DATA_SHARDING[{k!r}] names axis {a!r}, which is "
                                    f"not in MESH {list(mesh)}")
                if not isinstance(d, int) or isinstance(d, bool) or d < 0:
                    raise PlanError(f"{where}: DATA_SHARDING[{k!r}][{a!r}] must be a dim index "
                                    f">= 0, got {d!r}")
            checked[str(k)] = dict(v)
        ds = checked
    step = mod.__dict__.get("OPTIMIZER_STEP", 1)
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        raise PlanError(f"{p}:{_def_line(mod, 'OPTIMIZER_STEP', src)}: OPTIMIZER_STEP must be an "
                        f"int >= 1, got {step!r}")
    return TrainFile(path=p, sha256=sha, mesh=mesh, sizes=sizes, data_sharding=ds,
                     optimizer_step=step, module=mod, source=raw)


def optimizer_probe(tf: TrainFile, model: Any) -> Any:
    """``build_optimizer(model)``, checked to be a ``torch.optim.Optimizer``.

    Raises:
        PlanError: it raised (its line), or returned something else (``None`` for a pipeline
            stage without parameters: every rank steps an optimizer in a traced step).
    """
    import torch

    fn = tf.fn("build_optimizer")
    try:
        opt = fn(model)
    except Exception as e:  # noqa: BLE001
        raise PlanError(f"{tf.path}:{line_of(e, tf.path)}: build_optimizer: {type(e).__name__}: "
                        f"{e}") from None
    if not isinstance(opt, torch.optim.Optimizer):
        raise PlanError(f"{tf.path}:{fn.__code__.co_firstlineno}: build_optimizer returned "
                        f"{type(opt).__name__}, not a torch.optim.Optimizer: prove --torch "
                        "needs an optimizer on every rank (a pipeline stage without parameters "
                        "is not supported)")
    return opt
