"""Shared test settings: hypothesis profiles (CI is derandomised) and the repo root on sys.path."""

import functools
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# "ci" is the default (the README's test command and .ci/run set nothing): derandomised, so a
# run never fails at random; a failure prints the reproducing blob. "dev" / "thorough" draw fresh
# examples (HYPOTHESIS_PROFILE=dev), and hypothesis prints the seed of a failing run.
# (40 examples: CI's 10-minute budget, stop 22; "thorough" draws 500)
settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=25, deadline=None, print_blob=True)
settings.register_profile("thorough", max_examples=500, deadline=None, print_blob=True)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)

# hypothesis times garbage collections (for deadlines, off in every profile above) with a
# gc callback that writes module globals of ``junkdrawer``; once a hypothesis test has run in
# a worker, every ``gc.collect()`` of the in-process step-state tests (tests/adversarial,
# tests/torch_frontend/test_step_state.py) changed "the module hypothesis...junkdrawer" and
# failed them, depending on which worker xdist gave which test. Never installed here.
from hypothesis.internal.conjecture import junkdrawer as _junkdrawer  # noqa: E402

_junkdrawer._gc_initialized = True  # noqa: SLF001


def pytest_report_header(config):  # noqa: ARG001 -- pytest hook signature
    s = settings.get_profile(PROFILE)
    how = "derandomized (fixed seed per test)" if s.derandomize else "random seed (printed on failure)"
    return f"hypothesis profile: {PROFILE}, max_examples={s.max_examples}, {how}"


@pytest.hookimpl(trylast=True)  # after the fixtures' own teardown
def pytest_runtest_teardown(item, nextitem):  # noqa: ARG001 -- pytest hook signature
    """Fail the test that leaves torch's default dtype changed: it leaks into every later test in
    the same worker (CI stop 18: the trainer's byte counts doubled under a leaked float64)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_default_dtype() is not torch.float32:
        leaked = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        raise AssertionError(f"{item.nodeid} left torch's default dtype at {leaked}; restore it "
                             "(use a fixture, not a module-level set_default_dtype)")


# The longest tests of the README's command (seconds measured idle / at load 6, stop 25), run
# first: pytest-xdist hands tests out in collection order, so one of these collected last keeps
# one worker busy after the other has finished (the suite's wall time is its two workers' longer
# share). Order only; every test still runs.
RUN_FIRST = (    # (seconds at load ~3, stop 66)
    "tests/torch_frontend/test_pp_small.py::test_a_small_pipeline",               # ~46 s
    "tests/torch_frontend/test_examples.py::test_right_plans_prove_equivalent",   # ~39 s
    "tests/simulator/test_sim_cli.py::test_regime_ci_instance",                  # ~31 s
    "tests/torch_frontend/test_divergence_note.py::test_the_note_names_the_hook",  # ~27 s
    "tests/simulator/test_sim_fidelity.py::test_reprice_reproduces_the_clock",     # ~25 s
    "tests/torch_frontend/test_capture_processes.py::test_every_capture_child",   # ~13 s
    "tests/simulator/test_sim_sweep.py::test_resume_after_kill",                  # ~9 s
    "tests/torch_frontend/test_step_state.py::test_hooks_added_removed",
    "tests/torch_frontend/test_step_state.py::test_a_finalizer_or_thread",
)


def pytest_collection_modifyitems(config, items):  # noqa: ARG001 -- pytest hook signature
    """Move :data:`RUN_FIRST` to the front (stable otherwise)."""
    def rank(item) -> int:
        for i, prefix in enumerate(RUN_FIRST):
            if item.nodeid.startswith(prefix):
                return i
        return len(RUN_FIRST)
    items.sort(key=rank)


# test modules that fingerprint step state in-process (they name ``step_state`` or ``_Encoder``)
# and run no capture or guard that scans the collector's objects (stop 55)
_CAPTURE_MARKS = ("capture(", "capture_all", "run_jobs", "installed(", "take_snapshot",
                  "refuse_held", "fake_world", "pp_guard", "dispatcher_guard", "op_guard")
_FROZEN_HEAP: dict[str, bool] = {}


def _frozen_heap(path: str) -> bool:
    if path not in _FROZEN_HEAP:
        text = Path(path).read_text(errors="replace")
        _FROZEN_HEAP[path] = "/tests/proofs/" not in path and (
            "step_state" in text or "_Encoder" in text) and not any(
            m in text for m in _CAPTURE_MARKS)
    return _FROZEN_HEAP[path]


@pytest.fixture(autouse=True)
def _imports_frozen_for_the_step_state_tests(request):
    """In the modules :func:`_frozen_heap` picks, everything made before the test (torch, z3,
    sympy, hypothesis, the test modules: 476,000 objects after collection) is out of the
    collector's reach while it runs, so the ``gc.collect()`` of every fingerprint (R10-5;
    1.7 s each over the whole heap) walks the test's own objects (39 step-state tests, one
    process: 74 s -> 45 s, stop 55). The front end's scans of ``gc.get_objects()`` do not list
    frozen objects: the op guard's baseline (which code is torch's) is taken over the whole
    heap first, and dropped if the test made another (12 failures when the whole session was
    frozen)."""
    import gc

    if not _frozen_heap(str(request.node.fspath)):
        yield
        return
    from spec_lang.torch_frontend import op_guard

    kept = op_guard.current_baseline()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if op_guard._BASELINE[0] is not kept:  # noqa: SLF001 -- taken over a frozen heap
            op_guard._BASELINE[0] = None  # noqa: SLF001


@pytest.fixture(autouse=True)
def _process_state_of_the_named_modules(request, monkeypatch):
    """A test marked ``state_modules(*names)`` reads, in every process-state fingerprint it
    takes in this process (``process_state._process_state``, also through ``step_state``),
    the globals of the modules ``names`` only, besides the process-wide entries (environment,
    builtins, C state): the test's change touches those modules (or none), and one full
    fingerprint costs ~0.7 s in a worker holding every test module (360 of them took 385 s of
    the suite's CPU at stop 56: the 10-minute budget). ``prove --torch`` always reads every
    module; tests that check nothing else changes (``test_a_step_that_only_trains_changes_
    nothing``) and the end-to-end proves are not marked."""
    mark = request.node.get_closest_marker("state_modules")
    if mark is None:
        yield
        return
    from spec_lang.torch_frontend import process_state, step_state

    narrowed = functools.partial(process_state._process_state,  # noqa: SLF001
                                 modules=frozenset(mark.args))
    monkeypatch.setattr(process_state, "_process_state", narrowed)
    monkeypatch.setattr(step_state, "_process_state", narrowed)
    yield
