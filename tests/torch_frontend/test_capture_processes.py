"""Each capture child is a fresh interpreter of its own (``tracedata.run_jobs``), as the ranks
of a real run are: nothing one job did is seen by the next, and every child draws its own
string-hash seed (set order), numpy and torch seeds. Adversarial round 20 (finding R20-2,
``tests/adversarial/ATTEMPTS.md``): capture children forked from two servers that imported
torch once shared a hash seed per server, so a step that issues its all-reduces in a set's
order (``plans/round20/r20_04_ddp_set_order.py``) was EQUIVALENT in about half of the proves
instead of about 1 in 16; the fork servers were not shipped, and this test keeps any such
saving from coming back unseen."""

from __future__ import annotations

from pathlib import Path

from spec_lang.torch_frontend.tracedata import Job, run_jobs

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch" / "mlp_ddp.py"

PROBE = EXAMPLE.read_text().replace("MESH = {", '''import os as _os
import sys as _sys
from pathlib import Path as _P
import numpy as _np
import torch as _torch
import torch.nn.functional as _F

assert not hasattr(_F, "_shardproof_test_mark"), "a previous job's state leaked"
assert _os.environ.get("SHARDPROOF_TEST_MARK") is None, "a previous job's environment leaked"
_F._shardproof_test_mark = 1
_os.environ["SHARDPROOF_TEST_MARK"] = "1"
_P(_os.environ["SHARDPROOF_TEST_DIR"], str(_os.getpid())).write_text(
    f"{hash('shardproof')} {_np.random.randint(1 << 62)} {_torch.initial_seed()}")

MESH = {''', 1)


def test_every_capture_child_is_a_fresh_interpreter_with_its_own_seeds(tmp_path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("SHARDPROOF_TEST_DIR", str(tmp_path))
    sizes = {"batch": 8, "hidden": 6, "ffn": 10}
    # two jobs, one after the other (a leak would be seen by the second; the suite's time)
    jobs = [Job(str(EXAMPLE), sizes, None if k == 0 else {"dp": 1}, PROBE.encode(),
                None if k == 0 else {"dp": 2}) for k in range(2)]
    traces = run_jobs(jobs, workers=1)
    assert not traces[0].coords and traces[1].coords == {"dp": 1}
    seen = [p.read_text().split() for p in tmp_path.iterdir()]
    assert len(seen) == 2
    for k, what in enumerate(("string-hash seed", "numpy seed", "torch seed")):
        assert len({s[k] for s in seen}) == 2, (what, seen)
