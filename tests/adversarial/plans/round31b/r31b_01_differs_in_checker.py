"""Round 31b, a02: the plan traces differently in the self-check's early re-trace (its parent,
check-certificate, runs with --await-certificate): prove traces dp=4 with 2 micro-batches, the
checker's re-trace 1 micro-batch. Right outcome: the checker rejects prove's certificate
(binding / goals differ) and prove exits 4 with "verdict" UNKNOWN (never a plain EQUIVALENT)."""

import dataclasses
import os

from spec_lang import AdamW
from spec_lang.models import DEBUG, llama
from spec_lang.plans import megatron


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


IN_CHECKER = "--await-certificate" in _cmd(os.getppid())
model = llama(dataclasses.replace(DEBUG, batch=8))
spec = model.spec(AdamW())
plan = megatron(model, tp=1, dp=4, microbatches=1 if IN_CHECKER else 2)
