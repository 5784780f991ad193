"""Whether the code a module's import runs is a library file's, as that file was before the train
file ran (``c_registries.watch_atexit``: an exit callback such an import registers is read as
the library's own, by identity, as a library module's globals are; adversarial rounds 64b-64c).

A module the train file writes and imports is no library's (R64b-1: its import registered an
``argparse.Namespace``'s bound method, which the step reached and counted in): the module-level
code that registered the callback must be exactly what compiling a ``.py`` file under one of the
interpreter's library directories (``sysconfig``: stdlib, site-packages) gives, a file whose
inode last changed before :func:`take_library_dirs` ran (``st_ctime``: any write, rename or new
link sets it, and no call can set it back). A spec or loader the train file forges cannot pass:
the code that ran is compared, not what the module says of itself. z3's ``ExitStack.close``
(imported while torch builds a shape environment, R64c-3) and torch._dynamo's
``dump_compile_times`` pass.
"""

from __future__ import annotations

import os
import sysconfig
import time
import types

__all__ = ["library_code", "take_library_dirs"]

_DIRS: list[str] = []      # the library directories, real paths ending in a separator
_SINCE: list[float] = []   # when they were taken (before the train file ran)
_CHECKED: dict[tuple[str, types.CodeType], bool] = {}


def take_library_dirs() -> None:
    """Record the interpreter's library directories and the time (the capture child, before the
    train file is imported). Called once per process."""
    if _SINCE:
        return
    paths = sysconfig.get_paths()
    _DIRS.extend(sorted({os.path.join(os.path.realpath(paths[k]), "") for k in
                         ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}))
    _SINCE.append(time.time())


def library_code(code: types.CodeType, origin: object) -> bool:
    """``code`` (a module's top-level code object, as it ran) is what compiling ``origin`` gives,
    a ``.py`` file in a library directory unchanged since :func:`take_library_dirs`. False when
    not taken, or the file cannot be read or compiled."""
    if not _SINCE or type(origin) is not str or type(code) is not types.CodeType:
        return False
    key = (origin, code)
    if key not in _CHECKED:
        _CHECKED[key] = _same_code(code, origin)
    return _CHECKED[key]


def _same_code(code: types.CodeType, origin: str) -> bool:
    path = os.path.realpath(origin)
    if not path.endswith(".py") or not any(path.startswith(d) for d in _DIRS):
        return False
    try:
        if os.stat(path).st_ctime >= _SINCE[0]:
            return False
        with open(path, "rb") as f:
            source = f.read()
        return compile(source, origin, "exec", dont_inherit=True) == code
    except (OSError, SyntaxError, ValueError):
        return False
