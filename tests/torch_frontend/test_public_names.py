"""Every name a front-end module lists in ``__all__`` exists (stop 44: ``dataparallel`` listed a
name it does not define, which only ``from ... import *`` would have shown)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import spec_lang.torch_frontend as pkg

MODULES = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_every_name_in_all_exists(name):
    mod = importlib.import_module(f"spec_lang.torch_frontend.{name}")
    missing = [n for n in getattr(mod, "__all__", ()) if not hasattr(mod, n)]
    assert missing == [], f"{name}: {missing}"
