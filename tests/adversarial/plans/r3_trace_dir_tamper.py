"""Round 3, sandbox: a *correct* plan whose tracing child replaces a file of its own trace
directory that the parent reads after the child (``proofs/isolation.py`` ``_tail`` reads
``stderr``). The sandbox allows every write there. ``ADV_TAMPER``: ``dir`` (``stderr`` becomes
a directory), ``devzero`` (a symlink to ``/dev/zero``: ``seek(0, 2)`` answers 0, so the read is
unbounded), ``fifo`` (a FIFO with no writer: ``open`` blocks for ever), ``gone`` (removed), empty: nothing.

The plan is right (data parallel, gradients summed over dp, loss / |B|): the right outcome is
EQUIVALENT (exit 0), or a clean one-line refusal (exit 3); never a traceback, an exit code of
NOT EQUIVALENT, a hang or an unbounded read.

Writes only beneath its own trace directory (``TMPDIR`` in the tracing child).
"""
import os
import pathlib

from spec_lang import SGD, Axis, Dim, Loss, Mesh, Plan, Shard, Spec, all_reduce, ops, real

_mode = os.environ.get("ADV_TAMPER", "")
_here = pathlib.Path(os.environ.get("TMPDIR", "/nonexistent"))
if _mode and _here.name.startswith("shardproof-trace-") and (_here / "stderr").exists():
    os.unlink(_here / "stderr")
    if _mode == "dir":
        os.mkdir(_here / "stderr")
    elif _mode == "devzero":
        os.symlink("/dev/zero", _here / "stderr")
    elif _mode == "fifo":
        os.mkfifo(_here / "stderr")

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


def plan_loss(p, d):
    v = loss(p, d)
    return Loss(backward=v, report=all_reduce(v, DP))


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=plan_loss,
            reduce_grads=lambda name, g: all_reduce(g, DP, "sum"))
