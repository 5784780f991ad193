"""Adversarial round 60a (``tests/adversarial/ATTEMPTS.md``, "Round 60a"): 6a31c1e's
``c_registries`` (``watch_atexit``: only exit callbacks a module's own import registered are
exempt, R59d-1; the audit hook's record of ``gc.get_referrers`` / ``gc.get_objects`` calls from
outside ``spec_lang/``, R59d-2), attacked. Plans in ``plans/round60a/`` (templates r59d_01 /
r59d_02: the step doubles the gradients from step 2 on a flag); the truth is ``python
tests/adversarial/torch4_truth.py FILE 2``.

The unit forms run in a child process: ``watch_atexit`` and ``watch_audit_hooks`` change the
process for good (``atexit.register`` wrapped, an audit hook that cannot be removed), and the
attacks leave exit callbacks and codec cache entries behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.child_probe import run_child

ROUND = Path(__file__).resolve().parent / "plans" / "round60a"


def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


# -- R60a-1: a library module imported again and again, each import registering a callback ---

_REIMPORT = """
import atexit, json, sys
from spec_lang.torch_frontend import c_registries as C
from spec_lang.torch_frontend.process_state import OTHER_MODULE
from spec_lang.torch_frontend.step_state import state_changes
C.watch_atexit()
t0 = C.registry_texts(lambda v: False)[C.ATEXIT]
n0 = atexit._ncallbacks()
for _ in range(REPEAT):
    sys.modules.pop("rlcompleter", None)
    import rlcompleter
t1 = C.registry_texts(lambda v: False)[C.ATEXIT]
mod = {OTHER_MODULE + "rlcompleter": "m"}
print(json.dumps({"added": atexit._ncallbacks() - n0,
                  "changes": state_changes({C.ATEXIT: t0}, {C.ATEXIT: t1, **mod})}))
"""


@pytest.mark.state_modules()
def test_r60a_1_reimported_module_callbacks_counted_are_a_change():
    got = run_child(_REIMPORT.replace("REPEAT", "5"))
    assert got["added"] == 5
    assert "exit callbacks (atexit)" in got["changes"]


@pytest.mark.state_modules()
def test_r60a_1_control_one_import_is_exempt():
    got = run_child(_REIMPORT.replace("REPEAT", "1"))
    assert got == {"added": 1, "changes": {}}


@pytest.mark.slow
def test_r60a_1_prove_not_equivalent():
    assert _prove("r60a_06_atexit_reimport_filelock_wrong.py") != 0


@pytest.mark.slow
def test_r60a_1_rlcompleter_form_not_equivalent():
    # (UNKNOWN: rlcompleter's import sets readline's C state, read by c_settings)
    assert _prove("r60a_01_atexit_reimport_wrong.py") != 0


# -- R60a-2: gc.get_referrers from code compiled under a file name inside spec_lang/ ----------

_GC = """
import codecs, encodings, gc, importlib.util, json
from spec_lang.torch_frontend import c_registries as C
C.watch_audit_hooks()
ns = {"gc": gc, "codecs": codecs, "encodings": encodings}
src = '''
def c_cache():
    utf8 = codecs.lookup("utf-8")
    return [r for r in gc.get_referrers(utf8) if type(r) is dict and r is not encodings._cache
            and r.get("utf_8") is utf8][0]
'''
where = importlib.util.find_spec("spec_lang").submodule_search_locations[0] + "/value_text.py"
exec(compile(src, FILE, "exec"), ns)
cache = ns["c_cache"]()
print(json.dumps({"reached": "utf_8" in cache and cache is not encodings._cache,
                  "audit": (a := C.registry_texts(lambda v: False)[C.AUDIT]),
                  "unreadable": a.startswith(C.UNREADABLE)}))
"""


@pytest.mark.state_modules()
def test_r60a_2_gc_call_from_code_named_inside_spec_lang_is_recorded():
    got = run_child(_GC.replace("FILE", "where"))
    assert got["reached"]
    assert got["unreadable"]


@pytest.mark.state_modules()
def test_r60a_2_control_gc_call_from_the_train_file_is_recorded():
    got = run_child(_GC.replace("FILE", "'/tmp/train_r60a.py'"))
    assert got["reached"]
    assert got["unreadable"] and "/tmp/train_r60a.py:" in got["audit"]


@pytest.mark.slow
def test_r60a_2_prove_not_equivalent():
    assert _prove("r60a_02_codec_cache_gc_from_spec_lang_file_wrong.py") != 0


# -- R60a-3: the C codec cache's key set read by a lookup's effect on encodings._cache --------

_PROBE = """
import codecs, encodings, json
from spec_lang.torch_frontend import c_registries as C
C.watch_audit_hooks()

def c_cached(name):
    encodings._cache.pop(name, None)
    codecs.lookup(name)
    hit = name not in encodings._cache
    encodings._cache[name] = codecs.lookup(name)
    return hit

C.registry_texts(lambda v: False)     # (its first call imports what registers callbacks)
t0 = C.registry_texts(lambda v: False)
first = c_cached("koi8_t")
t1 = C.registry_texts(lambda v: False)
print(json.dumps({"first": first, "second": c_cached("koi8_t"),
                  "changed": [k for k in t0 if t0[k] != t1[k]],
                  "unreadable": [k for k in t1 if t1[k].startswith(C.UNREADABLE)]}))
"""


@pytest.mark.state_modules()
def test_r60a_3_codec_cache_key_read_through_lookup_is_seen():
    got = run_child(_PROBE)
    assert (got["first"], got["second"]) == (False, True)     # the flag works
    assert got["changed"] or got["unreadable"]


@pytest.mark.slow
def test_r60a_3_prove_not_equivalent():
    assert _prove("r60a_03_codec_cache_probe_by_lookup_wrong.py") != 0


# -- R60a-4: an mmap held by a signal handler, its position the counter ----------------------

def _handler_texts(value, change) -> tuple[str, str]:
    """``deep_text`` of a SIGUSR1-handler-like partial holding ``value``, before and after
    ``change(value)``."""
    import functools

    from spec_lang.torch_frontend.value_text import deep_text

    h = functools.partial(print, value)
    before = deep_text(h)
    change(value)
    return before, deep_text(h)


@pytest.mark.state_modules()
def test_r60a_4_mmap_position_is_read():
    import mmap

    from spec_lang.torch_frontend.value_text import TOO_DEEP

    m = mmap.mmap(-1, 64)
    try:
        before, after = _handler_texts(m, lambda v: v.seek(1))
        assert m.tell() == 1
        assert before != after or TOO_DEEP in after
    finally:
        m.close()


@pytest.mark.state_modules()
def test_r60a_4_control_mmap_byte_is_read():
    import mmap

    m = mmap.mmap(-1, 64)
    try:
        before, after = _handler_texts(m, lambda v: v.__setitem__(0, 1))
        assert before != after
    finally:
        m.close()


@pytest.mark.slow
def test_r60a_4_prove_not_equivalent():
    assert _prove("r60a_04_handler_mmap_position_wrong.py") != 0


# -- R60a-5: a closed StringIO held by a handler: the fingerprint raises --------------------

@pytest.mark.state_modules()
def test_r60a_5_closed_stringio_is_read_without_error():
    import io

    before, after = _handler_texts(io.StringIO("abc"), lambda v: v.close())
    assert before != after


@pytest.mark.slow
def test_r60a_5_prove_not_equivalent():
    # (exit 3: "capturing the training step failed: ValueError: I/O operation on closed file")
    assert _prove("r60a_05_handler_stringio_closed_wrong.py") != 0
