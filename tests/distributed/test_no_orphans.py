"""No stage process outlives its driver, even when the driver is SIGKILLed (PR_SET_PDEATHSIG chain)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from trainer.distributed.launcher import process_alive

DRIVER = """
import json, sys, time
from pathlib import Path
from trainer.api import TrainerConfig
from trainer.distributed import DistributedPipeline
pipe = DistributedPipeline(TrainerConfig(**json.loads(sys.argv[1])), Path(sys.argv[2]), cache_dir=Path(sys.argv[3]),
                           spares=1).start()
assert pipe.train_step().committed
print(json.dumps(pipe.all_pids()), flush=True)
time.sleep(600)
"""


def test_killing_the_driver_kills_every_stage_process(tiny, cache, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(tiny), str(tmp_path / "run"), str(cache)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    pids: list[int] = []
    try:
        pids = json.loads(proc.stdout.readline())
        assert len(pids) == 5 + 1 + 1  # the stages, the spare, the zygote
        assert all(process_alive(pid) for pid in pids)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30.0
        while any(process_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in pids if process_alive(pid)]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)
