"""Round 3: probes of the write sandbox (proofs/sandbox.py) from the plan's tracing child.

Each probe prints ``PROBE <name>: <result>`` on stderr. The plan is wrong (no data-parallel
all-reduce), so the right verdict is NOT EQUIVALENT (exit 1), or a refusal (exit 3) when a probe
changed something the parent watches. ``ADV_PROBES`` (comma separated) selects the probes.

Safety: acts only on an installation holding ``ADV_SANDBOX`` (a test's throw-away copy).
"""
import os
import pathlib
import socket
import sys

import proofs
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent.parent
_here = pathlib.Path(os.environ.get("TMPDIR", "/nonexistent"))
_target = _root / "proofs" / "confirm.py"


def _probe(name, fn):
    try:
        r = fn()
        print(f"PROBE {name}: ok {r!r}", file=sys.stderr)
    except BaseException as e:  # noqa: BLE001
        print(f"PROBE {name}: {type(e).__name__}: {e}", file=sys.stderr)


def _symlink_write():
    os.symlink(_target, _here / "ln_sym")
    with open(_here / "ln_sym", "a") as f:
        f.write("#")


def _rename_out():
    (_here / "mine").write_text("x")
    os.rename(_here / "mine", _root / "mine")


def _unix_socket():
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(_here / "sock"))
    return "bound"


def _replace(name, make):
    p = _here / name
    os.unlink(p)
    make(p)


def _sigkill_parent():
    import signal
    os.kill(os.getppid(), signal.SIGKILL)


PROBES = {
    "stderr_fifo": lambda: _replace("stderr", os.mkfifo),
    "stderr_dir": lambda: _replace("stderr", os.mkdir),
    "stderr_devzero": lambda: _replace("stderr", lambda p: os.symlink("/dev/zero", p)),
    "sigkill_parent": _sigkill_parent,
    "write": lambda: open(_target, "a").write("#"),
    "truncate": lambda: os.truncate(_target, _target.stat().st_size),
    "hardlink": lambda: os.link(_target, _here / "ln_hard"),
    "symlink_write": _symlink_write,
    "rename_out": _rename_out,
    "mkdir_out": lambda: os.mkdir(_root / "newdir"),
    "tmp_write": lambda: open("/tmp/adv3_sandbox_probe", "w").write("x"),
    "devshm_write": lambda: open("/dev/shm/adv3_sandbox_probe", "w").write("x"),
    "proc_parent_mem": lambda: open(f"/proc/{os.getppid()}/mem", "rb").read(1),
    "proc_parent_environ": lambda: len(open(f"/proc/{os.getppid()}/environ", "rb").read()),
    "proc_parent_fd": lambda: os.listdir(f"/proc/{os.getppid()}/fd"),
    "unix_socket": _unix_socket,
    "mkfifo": lambda: os.mkfifo(_here / "fifo"),
    "xattr": lambda: os.setxattr(_target, "user.adv3", b"1"),
    "utime_same": lambda: os.utime(_target, ns=(_target.stat().st_atime_ns,
                                                 _target.stat().st_mtime_ns)),
    "chmod_same": lambda: os.chmod(_target, _target.stat().st_mode & 0o7777),
    "chmod_dir_same": lambda: os.chmod(_root / "rewriting", (_root / "rewriting").stat().st_mode
                                       & 0o7777),
}

if (_root / "ADV_SANDBOX").exists():
    for _n in os.environ.get("ADV_PROBES", "").split(","):
        if _n:
            _probe(_n, PROBES[_n])

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
