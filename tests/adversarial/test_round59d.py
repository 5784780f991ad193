"""Adversarial round 59d (``tests/adversarial/ATTEMPTS.md``, "Round 59d"): 13013c4's
``c_registries`` (the exit-callback exemption for modules first imported in the step, and
``_standard_codec`` leaving a cached ``CodecInfo`` as ``encodings`` made it out of the codec
registry's text), attacked. Plans in ``plans/round59d/``; the truth is ``python
tests/adversarial/torch4_truth.py FILE 2`` (both wrong plans here: w0 0.00576 / w1 0.00275 /
w2 0.00422 at step 2, w0 0 at step 1).

Findings, fixed in stop 60: R59d-1 (the train file registers a library function of a module it
first imports in the step, 1000 times: exempt, yet ``atexit._ncallbacks()`` counts them; now
only what the module's own import registers is exempt, ``c_registries.watch_atexit``), R59d-2
(a standard ``CodecInfo`` the step caches is left out, yet the step reads the C cache through
``gc.get_referrers``; now such a call makes the fingerprint unreadable).
"""

from __future__ import annotations

import atexit
from pathlib import Path

import pytest

# imported at collection (round 59a: under conftest's frozen heap the codec registry is not found)
from spec_lang.torch_frontend import c_registries as C

ROUND = Path(__file__).resolve().parent / "plans" / "round59d"


def _prove(name: str) -> int:
    from proofs.cli import prove_main

    return prove_main(["--torch", str(ROUND / name), "--jobs", "1", "--no-check"])


def _atexit_changes(module_new: bool) -> dict[str, str]:
    """``state_changes`` of a step that registers ``filecmp.clear_cache`` (a plain function of a
    library module, no arguments) 3 times, ``filecmp`` first imported in the step when
    ``module_new`` (its module entry absent before the step, present after)."""
    import filecmp

    from spec_lang.torch_frontend.process_state import OTHER_MODULE
    from spec_lang.torch_frontend.step_state import state_changes

    t0 = C.registry_texts(lambda v: False)[C.ATEXIT]
    for _ in range(3):
        atexit.register(filecmp.clear_cache)
    try:
        t1 = C.registry_texts(lambda v: False)[C.ATEXIT]
    finally:
        atexit.unregister(filecmp.clear_cache)
    assert t1.count(C.CALLBACK_SEP) == t0.count(C.CALLBACK_SEP) + 3 - (t0 == "")
    mod = {OTHER_MODULE + "filecmp": "m"}
    return state_changes({C.ATEXIT: t0, **({} if module_new else mod)}, {C.ATEXIT: t1, **mod})


# -- R59d-1: exit callbacks the TRAIN FILE adds, of a library module new in the step ------------

@pytest.mark.state_modules()
def test_r59d_1_callbacks_registered_by_the_step_are_a_change():
    assert C.ATEXIT in _atexit_changes(module_new=True)


@pytest.mark.state_modules()
def test_r59d_1_control_module_not_new_is_a_change():
    assert _atexit_changes(module_new=False)[C.ATEXIT] != ""


@pytest.mark.slow
def test_r59d_1_prove_not_equivalent():
    assert _prove("r59d_01_atexit_new_library_module_wrong.py") != 0


# -- R59d-2: a standard CodecInfo cached in the step, the C cache read via gc.get_referrers -----

@pytest.mark.slow
def test_r59d_2_prove_not_equivalent():
    assert _prove("r59d_02_codec_cache_standard_entry_wrong.py") != 0


# -- R59d-3: a forged "standard" CodecInfo: a user closure compiled under an encodings file ----

_SRC = """
def make():
    n = 0

    def encode(input, errors="strict"):
        nonlocal n
        n += 1
        return n, 0
    return encode
"""


def _forged_info():
    """A ``CodecInfo`` whose encode function is the user's (a counter in its closure), compiled
    under ``encodings/koi8_t.py``'s file name and module name, put into ``encodings._cache``
    (the caller removes it)."""
    import codecs
    import encodings
    import encodings.koi8_t

    g = {"__name__": "encodings.koi8_t"}
    exec(compile(_SRC, encodings.koi8_t.__file__, "exec"), g)  # noqa: S102
    info = codecs.CodecInfo(g["make"](), codecs.charmap_decode, name="koi8_t")
    encodings._cache["r59d_unit"] = info  # noqa: SLF001
    return info


@pytest.mark.state_modules()
def test_r59d_3_forged_codec_info_is_not_standard():
    import encodings

    info = _forged_info()
    try:
        assert info.encode("")[0] == 1
        assert not C._standard_codec(info)  # noqa: SLF001
    finally:
        encodings._cache.pop("r59d_unit", None)  # noqa: SLF001


@pytest.mark.state_modules()
def test_r59d_3_control_real_entry_is_standard_and_attribute_is_not():
    import codecs
    import encodings

    info = codecs.lookup("koi8_t")
    assert encodings._cache.get("koi8_t") is info  # noqa: SLF001
    assert C._standard_codec(info)  # noqa: SLF001
    forged = _forged_info()
    try:
        forged.extra = 1
        assert not C._standard_codec(forged)  # noqa: SLF001
    finally:
        encodings._cache.pop("r59d_unit", None)  # noqa: SLF001


@pytest.mark.slow
def test_r59d_3_prove_not_equivalent():
    assert _prove("r59d_03_codec_forged_standard_entry_wrong.py") != 0


# -- right plans: no false UNKNOWN ---------------------------------------------------------------

@pytest.mark.slow
def test_r59d_right_codecs_and_imports_in_step_equivalent():
    assert _prove("r59d_04_codecs_imports_right.py") == 0
