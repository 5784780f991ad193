"""Standard-library (and one torch) globals filled on first use, which a step may fill without leaving state
for the next one (``tempfile.tempdir``, ``tempfile._name_sequence``): what
:mod:`spec_lang.torch_frontend.process_state` skips, and exactly when (R13-3, R14-3, R56d-4,
R56e-6). Split from :mod:`process_state`.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

__all__ = ["_lazy_cache"]

# the standard library's caches set on first use, in the step or before it depending on what
# ran first (``tempfile.gettempdir()`` sets ``tempfile.tempdir``: mlp_ddp was UNKNOWN in CI);
# torch's ``OpaqueBaseMeta.__instancecheck__`` caches the class ``FakeScriptObject`` at its first
# miss (the parallel step's ``DeviceMesh`` checks fill it: R57b-4, every right plan UNKNOWN)
_LAZY_GLOBALS = frozenset({("tempfile", "tempdir"), ("tempfile", "_name_sequence"),
                           ("torch._opaque_base", "_FakeScriptObject_cls")})


def _lazy_cache(module: str, key: str, v: Any) -> bool:
    """``module.key`` is a standard-library cache filled on first use, holding what that fill
    puts there (``tempfile.tempdir`` only as ``gettempdir()`` computes it: any other value is
    the user's state, R13-3)."""
    if type(key) is not str or (module, key) not in _LAZY_GLOBALS:
        return False
    if v is None:
        return True
    if key == "_FakeScriptObject_cls":     # exactly the class torch's fill puts there
        return v is getattr(sys.modules.get("torch._library.fake_class_registry"),
                            "FakeScriptObject", None)
    if key == "tempdir":
        return isinstance(v, str) and v == _default_tempdir()
    tf = sys.modules.get("tempfile")
    # the name generator, holding its random generator and pid only (a flag set on it is the
    # user's state: finding R14-3)
    import random  # noqa: PLC0415

    own = vars(v) if tf is not None and type(v) is getattr(tf, "_RandomNameSequence", None) \
        else None          # and the pid and generator its ``rng`` property sets (R56d-4)
    return own is not None and set(own) <= {"_rng", "_rng_pid"} \
        and type(own.get("_rng_pid", 0)) is int and own.get("_rng_pid", os.getpid()) == \
        os.getpid() and type(own.get("_rng", random.Random())) is random.Random \
        and _fresh_random(own.get("_rng"))


def _fresh_random(r: Any) -> bool:
    """``r`` (None or a ``random.Random``) holds nothing of its own but the unused Gaussian
    cache its ``__init__`` sets (R56e-6: a counter set on tempfile's generator)."""
    own = {} if r is None else vars(r)
    return set(own) <= {"gauss_next"} and own.get("gauss_next") is None


@functools.lru_cache(maxsize=1)
def _default_tempdir() -> str:
    import tempfile  # noqa: PLC0415

    return tempfile._get_default_tempdir()  # noqa: SLF001 -- what gettempdir() fills in
