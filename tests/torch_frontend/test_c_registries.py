"""The registries the interpreter keeps in C (``spec_lang/torch_frontend/c_registries.py``): the
exit callbacks, the codec registry and the audit hooks are found on this interpreter and read
(adversarial findings R58f-3, R58f-4 and the lead's round-59 audit-hook plan)."""

from __future__ import annotations

import atexit
import codecs
import encodings
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from spec_lang.torch_frontend import c_registries as C
from spec_lang.torch_frontend.value_text import UNREADABLE

ROOT = Path(__file__).resolve().parents[2]


def _texts() -> dict[str, str]:
    return C.registry_texts(lambda v: False)


class _Box:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> None:
        return None


def test_the_layouts_are_found_on_this_interpreter() -> None:
    assert C._ATEXIT_OFFSET is not None and C._ATEXIT_OFFSET % 8 == 0
    path, cache, errors = C._CODECS
    assert encodings.search_function in path
    assert errors["strict"] is codecs.strict_errors
    assert codecs.lookup("utf-8") in cache.values()
    t = _texts()
    assert not any(v.startswith(UNREADABLE) for v in t.values()), t


def test_an_exit_callback_and_its_state_are_read() -> None:
    before = _texts()[C.ATEXIT]
    box = _Box()
    atexit.register(box, 3, k="x")
    try:
        with_box = _texts()[C.ATEXIT]
        assert with_box != before and with_box.startswith(before)
        item = with_box.split(C.CALLBACK_SEP)[-1]
        assert "_Box" in item and "int:0" in item and "'x'" in item and "int:3" in item
        box.n = 1                                   # the counter R58f-4 kept there
        bumped = _texts()[C.ATEXIT]
        assert bumped != with_box and "int:1" in bumped.split(C.CALLBACK_SEP)[-1]
    finally:
        atexit.unregister(box)
    assert _texts()[C.ATEXIT] == before             # an emptied slot is no callback


def test_the_codec_search_path_cache_and_error_handlers_are_read() -> None:
    name = f"shardproof_test_{os.getpid()}"

    def search(n: str):
        if n == name:
            return codecs.CodecInfo(None, None, name=name)
        return None

    t0 = _texts()[C.CODECS]
    codecs.register(search)
    try:
        t1 = _texts()[C.CODECS]
        assert t1 != t0 and "search" in t1
        codecs.lookup(name).n = 0                   # R58f-3's counter, in the cache only
        t2 = _texts()[C.CODECS]
        codecs.lookup(name).n = 1
        t3 = _texts()[C.CODECS]
        assert name in t2 and t3 != t2 and "int:1" in t3
    finally:
        codecs.unregister(search)                   # (also empties the cache)
    codecs.register_error(name, codecs.strict_errors)
    assert name in _texts()[C.CODECS]


def test_an_exit_callback_is_exempt_only_from_a_module_new_in_the_step() -> None:
    sep, mod = C.CALLBACK_SEP, C.MODULE_SEP
    before = f"logging{mod}fn:logging.shutdown"
    lib = f"{before}{sep}torch._inductor.remote_cache{mod}fn:dump_cache_stats"
    new = {"torch._inductor.remote_cache"}.__contains__
    assert C.imported_in_step(before, lib, new)
    assert not C.imported_in_step(before, lib, lambda m: False)          # a module seen before
    user = f"{before}{sep}{mod}fn:train.hook"                            # the user's, or args
    assert not C.imported_in_step(before, user, lambda m: True)
    assert not C.imported_in_step(lib, before, new)                      # one removed
    assert not C.imported_in_step(UNREADABLE + "x", lib, new)


def test_a_callback_names_its_module_only_when_it_can_be_exempt() -> None:
    """MODULE is the module whose import registered the callback (one record per slot), for
    a plain library function called with no arguments only (R59d-1)."""
    def rec():
        return {id(json.dumps): ["json"]}
    lib = C._callback_text(json.dumps, (), C._NULL, lambda v: False, rec(), set())
    assert lib.split(C.MODULE_SEP)[0] == "json"
    assert C._callback_text(json.dumps, (), C._NULL, lambda v: False, {}, set()).startswith(C.MODULE_SEP)
    assert C._callback_text(json.dumps, (1,), C._NULL, lambda v: False, rec(), set()).startswith(
        C.MODULE_SEP)
    assert C._callback_text(json.dumps, (), {}, lambda v: False, rec(), set()).startswith(C.MODULE_SEP)
    assert C._callback_text(json.dumps, (), C._NULL, lambda v: True, rec(), set()).startswith(
        C.MODULE_SEP)
    assert C._callback_text(_Box(), (), C._NULL, lambda v: False, rec(), set()).startswith(C.MODULE_SEP)
    once = rec()                                    # one record: one slot named
    assert C._callback_text(json.dumps, (), C._NULL, lambda v: False, once, set()).startswith("json")
    assert C._callback_text(json.dumps, (), C._NULL, lambda v: False, once, set()).startswith(
        C.MODULE_SEP)


def test_a_library_objects_exit_callback_is_read_in_full_unless_a_library_registered_it():
    """R63e-1, R64a-1/-2: the train file's exit callback bound to a library class's object
    (``argparse.Namespace``) is read with what the object holds, so a count the step keeps
    there is a change; one a library registered (before the train file ran, or by a module's
    import: ``libraries``) by identity and its own attributes' types (z3's ExitStack)."""
    import argparse

    ns = argparse.Namespace(box=[0])
    cb = ns.__repr__

    def texts(libraries: set[int]) -> tuple[str, str]:
        a = C._callback_text(cb, (), C._NULL, lambda v: False, {}, libraries)
        ns.box[0] += 1
        return a, C._callback_text(cb, (), C._NULL, lambda v: False, {}, libraries)

    a, b = texts(set())
    assert a != b and "box" in a
    a, b = texts({id(cb)})
    assert a == b


_LIBMOD = """import atexit
import filecmp


@atexit.register
def a():
    pass


class K:
    @staticmethod
    @atexit.register
    def b():
        pass


def c():
    pass


def _setup():
    atexit.register(c)


_setup()
"""


def test_watch_atexit_records_only_what_a_modules_import_registers(tmp_path: Path) -> None:
    """R59d-1: the callbacks a module's own import registers (a decorator at module level and
    in a class body, a function of the module called by its module-level code) are recorded
    with the module; a library function registered by other code, a reload and module code
    run by ``exec`` with the module's globals are not, so their slots name no module."""
    (tmp_path / "shardproof_libmod.py").write_text(_LIBMOD)
    code = ("import sys; sys.path[:0] = sys.argv[1:3];"
            "from spec_lang.torch_frontend import c_registries as C;"
            "C.watch_atexit(); C.watch_atexit();"
            "import atexit, filecmp, importlib, shardproof_libmod as m;"
            "atexit.register(filecmp.clear_cache); importlib.reload(m);"
            "exec(compile('import atexit, filecmp; atexit.register(filecmp.clear_cache)', "
            "filecmp.__file__, 'exec'), vars(filecmp));"
            "print(sorted((n, f.__name__) for n, f in C._IMPORT_REGISTERED));"
            "t = C.registry_texts(lambda v: False)[C.ATEXIT].split(C.CALLBACK_SEP);"
            "print(sorted(x.split(C.MODULE_SEP)[0] for x in t if 'shardproof_libmod' in x "
            "or 'clear_cache' in x))")
    r = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT), str(tmp_path)],
                       capture_output=True, text=True, timeout=120, check=True)
    recorded, named = r.stdout.splitlines()
    assert recorded == str([("shardproof_libmod", "a"), ("shardproof_libmod", "b"),
                            ("shardproof_libmod", "c")])
    # 3 slots of the import, 3 of the reload (new functions), 2 of filecmp.clear_cache
    assert named == str([""] * 5 + ["shardproof_libmod"] * 3)


def test_gc_reads_outside_spec_lang_make_the_audit_entry_unreadable() -> None:
    """R59d-2: a ``gc.get_referrers`` / ``gc.get_objects`` call from code not the front end's
    own (it reaches the codec cache's keys) is recorded with its line and makes the
    fingerprint unreadable; the front end's own calls are not recorded (code merely compiled
    under a ``spec_lang`` file name is not the front end's: test_round60a, R60a-2)."""
    code = ("import sys, gc; sys.path.insert(0, sys.argv[1]);"
            "from spec_lang.torch_frontend import c_registries as C;"
            "from spec_lang.torch_frontend.pp_guard import live_pipeline_objects;"
            "C.watch_audit_hooks(); live_pipeline_objects();"   # (the front end's own call)
            "a = C.registry_texts(lambda v: False)[C.AUDIT];\n"
            "gc.get_referrers(C)\n"
            "b = C.registry_texts(lambda v: False)[C.AUDIT];"
            "print(repr(a)); print(b)")
    r = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT)], capture_output=True,
                       text=True, timeout=120, check=True)
    a, b = r.stdout.splitlines()
    assert a == "''"
    assert b.startswith(UNREADABLE) and "<string>:2 (gc.get_referrers): the train file reaches" in b


def test_an_audit_hook_added_after_the_watch_is_refused_and_unreadable() -> None:
    """R59-1, R59a-2: ``sys.addaudithook`` after the watch raises AuditHookAdded naming the
    caller's line, the hook is not added (it never runs, even when the record is emptied),
    and the record makes the fingerprint unreadable."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]);"
            "from spec_lang.torch_frontend import c_registries as C;"
            "C.watch_audit_hooks(); C.watch_audit_hooks();"
            "a = C.registry_texts(lambda v: False)[C.AUDIT];"
            "calls = [];\n"
            "try:\n    sys.addaudithook(lambda e, x: calls.append(e))\n"
            "except C.AuditHookAdded as e:\n    print(str(e))\n"
            "b = C.registry_texts(lambda v: False)[C.AUDIT];"
            "C._AUDIT_ADDED.clear(); sys.audit('shardproof.test');"
            "print(repr(a)); print(repr(b)); print(calls)")
    r = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT)], capture_output=True,
                       text=True, timeout=120, check=True)
    err, a, b, calls = r.stdout.splitlines()
    assert err.startswith("<string>:3: the train file adds an audit hook (sys.addaudithook)")
    assert a == "''"
    assert b.startswith(repr(UNREADABLE)[:-1]) and "1 audit hook(s)" in b
    assert calls == "[]"


def test_a_standard_codec_entry_is_its_key_until_it_is_touched() -> None:
    """R59a-4, R60a-3: of a cached ``CodecInfo`` as ``encodings`` made it only the key is
    state (a later lookup makes its equal value; whether the name is cached, a step can tell);
    one given an attribute, or an encode function of the user's, is read in full."""
    info = codecs.lookup("cp1026")
    assert C._standard_codec(info)
    plain = _texts()[C.CODECS]
    assert re.search(r"\('cp1026', '[^']*:<standard>'\)", plain), plain   # (its identity)
    try:
        info.n = 0
        assert not C._standard_codec(info) and _texts()[C.CODECS] != plain
        del info.n
        assert C._standard_codec(info)
        kept = info.encode
        info.encode = lambda s, errors="strict": (b"", 0)
        assert not C._standard_codec(info)
        info.encode = kept
    finally:
        vars(info).pop("n", None)
    assert C._standard_codec(info)


def test_c_settings_see_putenv_and_the_signal_mask() -> None:
    """``os.putenv`` changes the C environment torch's C++ code reads, not ``os.environ``; the
    blocked signal mask (R59a-3) is a setting too."""
    import signal

    before = C.c_settings()[C.SETTINGS]
    name = f"SHARDPROOF_TEST_{os.getpid()}"
    os.putenv(name, "1")
    try:
        assert name not in os.environ and C.c_settings()[C.SETTINGS] != before
    finally:
        os.unsetenv(name)
    assert C.c_settings()[C.SETTINGS] == before
    old = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
    try:
        assert C.c_settings()[C.SETTINGS] != before
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
