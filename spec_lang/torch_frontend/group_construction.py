"""What the real backend checks when a process group is made and the capture's fake one does
not (adversarial rounds 36d and 37a: R36d-1, R37a-4, R37a-6..9).

The capture makes every group on torch's fake backend, which reads neither the environment nor
most arguments. The real run's gloo (or nccl) does, and raises; a train file that catches the
error takes another branch in the real run only (r36d_03: ``GLOO_SOCKET_IFNAME`` naming no
interface around a ``new_group``, caught, no gradient all-reduce: EQUIVALENT for a wrong plan).
So, in a fake world, while the train file's code runs, a group made

* with a ``timeout=`` outside ``[0, 100 years]`` (gloo: "timeout.count() >= 0"; a negative
  ``timedelta`` and ``timedelta.max``, which overflows gloo's nanosecond count: R37a-6), or
* after the environment the backends read when a group is made changed since the launch
  (:data:`BACKEND_ENV`: ``GLOO_*``, ``TORCH_GLOO_*``, ``NCCL_*``, ``TORCH_DISTRIBUTED_DEBUG``;
  compared with the environment before the train file was imported, R37a-7, and read from the
  C ``environ`` the backends ``getenv``, so ``os.putenv`` counts: R37a-8; torch's own
  ``TORCH_NCCL_*`` knobs, which torchtitan sets, make no construction fail: R37a-4), or
* that raises in the capture,

is recorded and refused even if the train file catches the error (:func:`refusal`). This holds
for ``dist.new_group`` (:mod:`new_groups`) and for the groups a ``DeviceMesh`` of the train
file's own makes (``device_mesh`` bound torch's ``new_group`` / ``split_group`` by name before
shardproof could replace them: R37a-9; :func:`watch_device_mesh`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

__all__ = ["BACKEND_ENV", "backend_env", "take_launch_env", "launch_env", "why_it_may_raise",
           "refusal", "made_checked", "watch_device_mesh"]

BACKEND_ENV = ("GLOO_", "TORCH_GLOO_", "NCCL_", "TORCH_DISTRIBUTED_DEBUG")
_MAX_TIMEOUT = timedelta(days=36500)    # 3.2e18 ns: within gloo's signed 64-bit count
RAISES = ("dist.new_group can raise in the real run where the capture's fake backend cannot, "
          "or the other way round: code that catches the error takes a branch the capture "
          "cannot tell from the real run's")
_LAUNCH: list[dict[str, str]] = []


def _c_environ() -> dict[str, str] | None:
    """The process's C ``environ`` (what ``getenv`` reads; ``os.putenv`` changes it and not
    ``os.environ``), or None where it cannot be read."""
    try:
        import ctypes

        env = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
        out: dict[str, str] = {}
        for i in range(1 << 16):
            item = env[i]
            if item is None:
                return out
            k, _, v = item.decode("utf-8", "surrogateescape").partition("=")
            out[k] = v
    except (OSError, ValueError, AttributeError):
        return None
    return None


def backend_env() -> dict[str, str]:
    """The variables of :data:`BACKEND_ENV` in the C environment (``os.environ`` where the C
    one cannot be read)."""
    env = _c_environ()
    return {k: v for k, v in (env if env is not None else os.environ).items()
            if k.startswith(BACKEND_ENV)}


def take_launch_env() -> None:
    """Record :func:`backend_env` as the launch's (the first call: the capture child calls it
    before the train file is imported, through ``new_groups.watch``)."""
    if not _LAUNCH:
        _LAUNCH.append(backend_env())


def launch_env() -> Mapping[str, str]:
    """The environment recorded by :func:`take_launch_env` (taken now if none was)."""
    take_launch_env()
    return _LAUNCH[0]


def why_it_may_raise(timeout: Any) -> str | None:
    """Why the real backend could raise making a group where the fake one does not, or None."""
    if timeout is not None and type(timeout) is not timedelta:
        # a subclass's comparisons are the train file's (R38a-4: __ge__ / __le__ always True
        # over -1 s, which gloo rejects)
        return f"a timeout of type {type(timeout).__name__} (not a datetime.timedelta)"
    if timeout is not None and not timedelta(0) <= timeout <= _MAX_TIMEOUT:
        return (f"a timeout of {timeout.total_seconds():g} s (gloo takes 0 to "
                f"{_MAX_TIMEOUT.days} days)")
    env, was = backend_env(), launch_env()
    if env != was:
        keys = sorted(k for k in set(env) | set(was) if env.get(k) != was.get(k))
        return f"the environment its backend reads changed since the launch ({', '.join(keys)})"
    return None


def refusal(what: str) -> str | None:
    """Record ``what`` as a refusal of the running capture (even if caught) and return the
    message; None outside the train file's code."""
    from spec_lang.torch_frontend.fake_answers import note

    return note(what, RAISES)


def made_checked(fn: Callable[..., Any], label: str, why: str | None, a: Any, k: Any) -> Any:
    """``fn(*a, **k)`` (torch's making of a group, in a fake world), refusing ``why`` (what
    :func:`why_it_may_raise` named) and an error ``fn`` raises, even if the train file
    catches it.

    Raises:
        PlanError: ``why`` is not None, in the train file's code.
    """
    from spec_lang.errors import PlanError

    if why is not None:
        msg = refusal(f"{label} with {why}")
        if msg is not None:
            raise PlanError(msg)
    try:
        return fn(*a, **k)
    except PlanError:
        raise
    except Exception as e:
        refusal(f"{label} raised in the capture's fake world ({type(e).__name__}: {e})")
        raise


def _checked(fn: Callable[..., Any], label: str, on: Callable[[], bool]) -> Callable[..., Any]:
    """``fn`` (torch's ``new_group`` / ``split_group`` as ``device_mesh`` holds it), through
    :func:`made_checked` in a fake world."""
    @functools.wraps(fn)
    def made(*a: Any, **k: Any) -> Any:
        if not on():
            return fn(*a, **k)
        return made_checked(fn, label, why_it_may_raise(k.get("timeout")), a, k)
    return made


def watch_device_mesh(on: Callable[[], bool]) -> None:
    """Replace ``torch.distributed.device_mesh``'s ``new_group`` / ``split_group`` (bound from
    ``distributed_c10d`` when torch was imported) with :func:`_checked` ones (idempotent):
    a mesh the train file makes (``init_device_mesh``, ``_flatten``) makes its groups there
    (R37a-9)."""
    import torch.distributed.device_mesh as dm

    for name in ("new_group", "split_group"):
        fn = vars(dm).get(name)
        if fn is not None and not getattr(fn, "_shardproof_checked", False):
            wrapped = _checked(fn, f"a DeviceMesh's {name}", on)
            wrapped._shardproof_checked = True      # type: ignore[attr-defined]
            setattr(dm, name, wrapped)
