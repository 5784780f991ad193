"""The child process that captures one trace: ``python -I -c BOOT ROOT FILE JOB OUT`` (``JOB`` =
JSON ``{"sizes": {...}, "coords": {...} | null, "mesh": {...} | null, "source": file of the
train file's bytes, "state": false at the probe sizes (the step-state fingerprints skipped:
``capture.capture``'s ``state``)}``; see
:mod:`spec_lang.torch_frontend.tracedata`). Writes the trace's bytes to ``OUT``, or ``ERROR\\n``
and the one-line message of a user error."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    path, job, out = argv
    spec = json.loads(job)
    # no automatic full collection while torch and the front end load and the guards take
    # their baselines (~300,000 objects: 5 full collections, ~0.3 CPU s a child; the young
    # generations are still collected): one, and torch's thresholds back, before the train
    # file is imported, which sees the collector as ever
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
    from spec_lang.errors import SpecLangError
    from spec_lang.torch_frontend.c_registries import (AuditHookAdded, watch_atexit,
                                                        watch_audit_hooks)
    from spec_lang.torch_frontend.pp_capture import NeedsCpu
    from spec_lang.torch_frontend.tracedata import NEEDS_CPU

    try:
        from spec_lang.torch_frontend.capture import capture
        from spec_lang.torch_frontend.caught import check as caught_check
        from spec_lang.torch_frontend.contract import read_train_file
        from spec_lang.torch_frontend.dispatcher_guard import kernel_changes, step_starts
        from spec_lang.torch_frontend.dispatcher_guard import take_snapshot as take_kernels
        from spec_lang.torch_frontend.op_guard import take_baseline
        from spec_lang.torch_frontend.thread_guard import take_threads
        from spec_lang.torch_frontend.pp_guard import take_snapshot
        from spec_lang.torch_frontend.tracedata import dump
        from spec_lang.torch_frontend.version import check_torch
        from spec_lang.torch_frontend.world import fake_world

        from spec_lang.errors import PlanError
        from spec_lang.torch_frontend.world import launcher_environment

        check_torch()
        # the rank's environment before the file is imported (finding R7-4)
        mesh = {str(k): int(v) for k, v in (spec.get("mesh") or {}).items()}
        launcher_environment(mesh, spec["coords"])
        # dist.new_group recorded, before the train file can bind it (issue 11)
        from spec_lang.torch_frontend.new_groups import watch
        watch()
        # torch's dispatch switches refused to the train file, before it can bind them (R49e-1)
        from spec_lang.torch_frontend.dispatch_escapes import check as escapes_check
        from spec_lang.torch_frontend.dispatch_escapes import install as refuse_escapes
        refuse_escapes(path)
        # torch's pipelining as torch ships it, before the train file runs (round 29, R29-2)
        take_snapshot()
        take_baseline()         # the code and classes that exist before it (R30c-1)
        take_threads()          # the threads alive before it (R34b-2)
        watch_audit_hooks()     # an audit hook it adds is refused (c_registries)
        watch_atexit()          # the exit callbacks an import registers, recorded (R59d-1)
        # a collective on a real tensor refused (R35a-1, R35d-3), before the snapshot
        from spec_lang.torch_frontend.fake_answers import importing, install
        install()
        take_kernels()          # the dispatcher's kernels as torch ships them (R31-2)
        gc.collect()
        gc.set_threshold(*thresholds)
        with importing(path):   # a store or a collective when imported (R35d-6)
            tf = read_train_file(path, Path(spec["source"]).read_bytes())
        _refuse_replaced_builtins(path, "when imported")   # (before the guards call them: R61a-3)
        caught_check(path, "when imported")     # R35d-2, round 38
        escapes_check()
        _refuse_kernels(path, kernel_changes(), "when imported")
        _refuse_distributed(path)
        step_starts()           # a kernel registered from now on is the train file's (R32b-3)
        if spec["coords"] is not None and dict(tf.mesh) != mesh:
            raise PlanError(f"{path}:1: the train file declares the mesh {dict(tf.mesh)} when "
                            f"imported as rank {spec['coords']}, {mesh} before: declare one "
                            "mesh, whatever the rank")
        sys.path.insert(0, str(Path(path).resolve().parent))
        sizes = {k: int(v) for k, v in spec["sizes"].items()}
        state = spec.get("state") is not False    # (False: a trace at the probe sizes)
        if spec["coords"] is None:
            tr = capture(tf, sizes, state=state)
        else:
            with fake_world(tf.mesh, spec["coords"]) as w:
                pp_in = spec.get("pp_in")
                tr = capture(tf, sizes, mesh=w.mesh, coords=w.coords, groups=w.groups,
                             pp_in=None if pp_in is None else [
                                 (tuple(s), d, tuple(st), bool(rg)) for s, d, st, rg in pp_in],
                             cpu=bool(spec.get("cpu")), state=state)
        _refuse_replaced_builtins(path, "during the capture")
        caught_check(path, "during the capture")
        escapes_check()
        _refuse_kernels(path, kernel_changes(), "after the step")
        # names as the state_dict gives them (torch's checkpoint wrapper: round 38e, r38e_10)
        from spec_lang.torch_frontend.wrapper_names import state_dict_names
        Path(out).write_bytes(dump(state_dict_names(tr, path)))
    except NeedsCpu:
        Path(out).write_bytes(NEEDS_CPU)   # traced again on fake cpu tensors, in a new process
    except SpecLangError as e:
        Path(out).write_bytes(b"ERROR\n" + str(e).encode())
    except AuditHookAdded as e:     # an audit hook the train file adds (a BaseException)
        Path(out).write_bytes(b"ERROR\n" + str(e).encode())
    return 0


def run(argv: list[str]) -> None:
    """:func:`main`, then the process ends at once with its exit code (``os._exit``, stdout
    and stderr flushed): the trace's bytes are written and every check has run, and the
    interpreter's teardown (finalizing ~2,000 modules and ~400 MB of torch's and the trace's
    objects: ~1 CPU s of each capture child's ~5.5) would only run the train file's exit
    handlers and finalizers after them. An exception out of :func:`main` ends the process as
    before (a traceback, exit 1)."""
    rc = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _refuse_replaced_builtins(path: str, when: str) -> None:
    """Refuse a train file that replaced or removed one of Python's builtins (``builtins.sorted
    = ...``): the capture's own guards and fingerprints call them, and one answering them
    differently hid a kernel registered at import (R32b-5) and every C setting (R61a-3).

    Raises:
        PlanError: naming the builtins (exit 3)."""
    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.process_state import replaced_builtins

    names = replaced_builtins()
    if names:
        raise PlanError(f"{path}:1: the train file replaces Python's "
                        f"{', '.join(names[:5])} {when}: prove --torch's own checks call the "
                        "builtins and read sys.modules, so it cannot read your step through "
                        "them; leave them as Python made them (patch your own modules "
                        "instead)")


def _refuse_distributed(path: str) -> None:
    """Refuse a train file that left ``torch.distributed`` modified when imported (R36c-1,
    r36c_06: ``ProcessGroupGloo.__init__`` replaced at import crossed the real run's mesh
    groups, made by the launcher after the import; the capture's fake world constructs none).

    Raises:
        PlanError: naming up to three of the attributes that differ from torch's.
    """
    from spec_lang.errors import PlanError
    from spec_lang.torch_frontend.pp_guard import current_snapshot, modified

    what = modified(current_snapshot(), {})
    if what:
        raise PlanError(f"{path}:1: torch.distributed was modified when the train file was "
                        f"imported: {', '.join(what[:3])} is not torch's own, and the real run "
                        "makes its process groups with it; leave torch.distributed as torch "
                        "ships it")


def _refuse_kernels(path: str, changes: list[str], when: str) -> None:
    """Refuse a train file that changed the dispatcher's kernels (round 31, R31-2): the
    capture runs torch's Meta and fake kernels, the real run the ones it registered."""
    from spec_lang.errors import PlanError

    if changes:
        import re

        at = re.search(r"(?:registered|made) at (.+?):(\d+)$", changes[0])
        where = f"{at[1]}:{at[2]}" if at and Path(at[1]).resolve() == Path(path).resolve() \
            else f"{path}:1"
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        raise PlanError(
            f"{where}: the train file changes torch's operator kernels {when}: "
            f"{changes[0]}{more}; the capture traces on meta tensors and runs torch's Meta "
            "kernels, so a kernel of the real device registered by the train file "
            "(torch.library Library(..., 'IMPL') / impl / py_impl on an existing op) is "
            "never seen: remove the registration (define your own op in your own "
            "namespace instead)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
