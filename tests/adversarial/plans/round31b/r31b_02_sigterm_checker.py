"""Round 31b, a03: the early re-trace SIGTERMs its parent, the self-check's checker (the sandbox
does not scope signals; known since round 3, s27). Right outcome: no verdict both agree on:
prove exits 2 with "verdict" UNKNOWN (the checker's SIGTERM handler exits 2 without an answer)."""

import dataclasses
import os
import signal
import time

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans import megatron


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


if "--await-certificate" in _cmd(os.getppid()):
    os.kill(os.getppid(), signal.SIGTERM)
    time.sleep(1)
model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = megatron(model, tp=1, dp=4, microbatches=2)
