"""Fast checks of :mod:`spec_lang.torch_frontend.registry_state` (stop 41): a standard-library
ABC's registry changed by the step (R40b-2) and a ``sys.modules`` entry no import made (R40b-5)
are changes of the step; what a real import during the step registers or adds is not."""

from __future__ import annotations

import abc
import importlib.machinery
import numbers
import os
import sys
import types

from spec_lang.torch_frontend.process_state import OTHER_MODULE, TORCH_MODULE
from spec_lang.torch_frontend.registry_state import (
    ABC_REGISTRY, ABC_TOKEN, NOT_IMPORTED, abc_classes, file_copies, import_made, import_origin,
    registry_state,
)
from spec_lang.torch_frontend.step_state import state_changes

_MODULES = (TORCH_MODULE, OTHER_MODULE)


def test_module_level_abcs_are_found():
    found = abc_classes()
    assert numbers.Number in found and sys.modules["collections.abc"].Mapping in found
    assert sys.modules["os"].PathLike in found


def test_a_stdlib_abc_registration_is_a_change():
    class Cfg:
        pass

    before = registry_state()
    numbers.Number.register(Cfg)      # (a weak reference: gone with Cfg)
    changed = state_changes(before, registry_state())
    assert f"{ABC_REGISTRY}numbers.Number" in changed
    assert ABC_TOKEN in changed


def test_a_throwaway_abc_register_moves_the_token_unexplained():
    before = registry_state()

    class Throwaway(abc.ABC):
        pass

    Throwaway.register(int)
    del Throwaway
    assert ABC_TOKEN in state_changes(before, registry_state())


def test_a_hand_made_module_in_sys_modules_is_a_change():
    before = registry_state()
    m = types.ModuleType("_fix41_scale")
    m.scale = 0.5
    sys.modules["_fix41_scale"] = m
    try:
        changed = state_changes(before, registry_state())
    finally:
        del sys.modules["_fix41_scale"]
    assert any(k.startswith(f"{NOT_IMPORTED}_fix41_scale") for k in changed), changed


def test_import_origin():
    assert import_origin(sys.modules["json"]) is None          # a file
    assert import_origin(sys.modules["sys"]) is None           # built-in
    assert import_origin(types.ModuleType("x")) == "no spec, no file"
    assert import_origin(object()) == "not a module"
    fake = types.ModuleType("y")
    fake.__spec__ = types.SimpleNamespace(loader=object(), origin="/no/such/file.py")
    assert import_origin(fake) == "a spec of another type"
    fake.__spec__ = importlib.machinery.ModuleSpec("y", object(), origin="/no/such/file.py")
    assert import_origin(fake) == "origin not found"
    # (R66a-1) a built-in / frozen origin holds only for a module built in / frozen by that name
    fake.__spec__.origin = "frozen"
    assert import_origin(fake) == "a frozen origin of a module that is not frozen"
    fake.__spec__.origin = "built-in"
    assert import_origin(fake) == "a built-in origin of a module that is not built-in"
    # (R66b-2) nor for one named after a frozen module it is not, even by importlib's importer
    fake.__spec__ = importlib.machinery.ModuleSpec("os", importlib.machinery.FrozenImporter,
                                                   origin="frozen")
    assert import_origin(fake) == "a frozen origin of a module that is not frozen"
    assert import_origin(sys.modules["os"]) is None and \
        sys.modules["os"].__spec__.origin in ("frozen", os.__file__)


def test_a_real_import_during_the_step_is_not_a_change():
    """What an import registers (networkx's Config with Mapping) or puts into sys.modules
    (pyexpat's submodules) is the import's: exempt when the module is new after the step."""
    mod = f"{OTHER_MODULE}newpkg"
    before = {ABC_TOKEN: "10",
              f"{ABC_REGISTRY}collections.abc.Mapping": "in collections.abc:a:B@1"}
    after = {ABC_TOKEN: "12", mod: "x",
             f"{ABC_REGISTRY}collections.abc.Mapping": "in collections.abc:a:B@1,newpkg:C@2",
             f"{ABC_REGISTRY}newpkg.Abc": "in newpkg:newpkg:D@3",
             f"{NOT_IMPORTED}newpkg.sub (not made by an import)":
                 "no spec, no file:builtins.module@4 held by its parent newpkg"}
    assert import_made(before, after, _MODULES) == set(after) - {mod}
    assert state_changes(before, after) == {}


def test_a_registration_of_an_old_or_unheld_class_is_not_exempt():
    before = {ABC_TOKEN: "10", OTHER_MODULE + "old": "x",
              f"{ABC_REGISTRY}numbers.Number": "in numbers:"}
    for cls in ("old:Cfg@5", "newpkg:Cfg@5!"):
        after = {**before, ABC_TOKEN: "11", OTHER_MODULE + "newpkg": "y",
                 f"{ABC_REGISTRY}numbers.Number": f"in numbers:{cls}"}
        assert set(state_changes(before, after)) == {f"{ABC_REGISTRY}numbers.Number",
                                                      ABC_TOKEN}


def test_a_hand_made_submodule_of_an_old_module_is_not_exempt():
    before = {OTHER_MODULE + "json": "x"}
    after = {**before, f"{NOT_IMPORTED}json.x (not made by an import)":
             "no spec, no file:builtins.module@4 held by its parent json"}
    assert len(state_changes(before, after)) == 1


def test_a_namespace_package_is_made_by_an_import(tmp_path):
    """Round 65d (r65d_07): ``mpl_toolkits``, a namespace package matplotlib imports lazily in
    a step, has no origin; read as a module made by hand it made a right plan UNKNOWN. A spec
    with importlib's ``NamespaceLoader`` whose search locations are directories is an
    import's; the same spec naming a directory that does not exist, or another loader, is
    not."""
    import importlib.machinery
    import types

    from spec_lang.torch_frontend.registry_state import import_origin

    def module(locations, loader_type=importlib.machinery.NamespaceLoader):
        m = types.ModuleType("r65_ns")
        loader = loader_type.__new__(loader_type)
        m.__spec__ = importlib.machinery.ModuleSpec("r65_ns", loader, is_package=True)
        m.__spec__.submodule_search_locations = locations
        return m

    assert import_origin(module([str(tmp_path)])) is None
    assert import_origin(module([str(tmp_path / "missing")])) == "no origin"
    assert import_origin(module([str(tmp_path)], importlib.machinery.SourceFileLoader)) \
        == "no origin"
    assert import_origin(module(None)) == "no origin"


def test_file_copies_are_modules_sharing_a_file():
    # (R65d-3) torch's and the standard library's modules share no file, a C extension's
    # submodules (``torch._C._autograd``: no spec, held by ``torch._C``) excepted
    import importlib.util
    import fnmatch

    import torch  # noqa: F401

    loaded = list(sys.modules.items())
    base = file_copies(loaded)    # (pytest may import a test package under two names, and
    #                                a test of this worker may have left a copy in sys.modules)
    assert "torch._C._autograd" in sys.modules and not {
        "torch", "torch._C", "torch._C._autograd", "fnmatch", "os", "json"} & base, base
    spec = importlib.util.spec_from_file_location("fnmatch_copy_r66", fnmatch.__file__)
    copy = importlib.util.module_from_spec(spec)
    hand = types.ModuleType("hand_r66")
    hand.__file__ = fnmatch.__file__                  # (no spec: by its file)
    alias = [("fnmatch_alias_r66", fnmatch)]          # (one module under two names: no copy)
    assert file_copies(loaded + [("fnmatch_copy_r66", copy)]) == \
        base | {"fnmatch", "fnmatch_copy_r66"}
    assert file_copies(loaded + [("hand_r66", hand)]) == base | {"fnmatch", "hand_r66"}
    assert file_copies(loaded + alias) == base
    # (R66b-3) a copy whose spec names another existing file names its own elsewhere: its
    # loader's path, its __file__, its functions' code
    copy.__spec__.loader.exec_module(copy)
    copy.__spec__.origin = os.devnull
    assert file_copies(loaded + [("fnmatch_copy_r66", copy)]) == \
        base | {"fnmatch", "fnmatch_copy_r66"}
    del copy.__file__
    copy.__spec__.loader.path = os.devnull
    assert file_copies(loaded + [("fnmatch_copy_r66", copy)]) == \
        base | {"fnmatch", "fnmatch_copy_r66"}
    # a submodule without a spec on torch._C's file that torch._C does not hold is a copy
    ext = types.ModuleType("torch._C._r66")
    ext.__file__ = sys.modules["torch._C._autograd"].__file__
    assert file_copies(loaded + [("torch._C._r66", ext)]) == base | {"torch._C", "torch._C._r66"}
