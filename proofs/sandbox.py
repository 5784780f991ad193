"""A write sandbox for the plan's tracing child: Linux Landlock (issue 10 family 6; adversarial
round 2, findings R2-1, R2-2, R2-4, R2-5, R2-9).

A plan file runs as the same OS user as ``prove``, so without a sandbox it can write into the
installation: a module ``prove`` imports later, a bytecode cache, the certificate schema, a
file rewritten in place with its old mtime, or all of these from a process it detached from
its session that writes after every check. :mod:`proofs.code_guard` detects what it can;
this module removes the ability. Before the child runs any of the plan's code it restricts
itself, and every process it starts, with a Landlock ruleset (Linux >= 5.13, unprivileged,
irrevocable, inherited across ``fork``/``exec`` and ``setsid``): file-system *writes* --
creating, writing, truncating, renaming, linking or removing files and directories -- are
allowed only beneath the trace's own temporary directory (which becomes ``TMPDIR``) and on
``/dev/null``; reads are not restricted. Landlock cannot be lifted by the sandboxed process.

Where Landlock is not available (another OS, an older kernel, a kernel built without it,
a seccomp profile that blocks the syscalls), :func:`restrict_writes` says why and the child
runs without it; :mod:`proofs.code_guard` is then the only protection, as documented in
``docs/trusted-base.md``.

Sources: the Linux kernel's Landlock documentation (``Documentation/userspace-api/
landlock.rst``), ``include/uapi/linux/landlock.h`` (access bits and structs, ABI 1-3).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

__all__ = ["restrict_writes", "landlock_abi"]

# asm-generic syscall numbers: the same on x86_64 and aarch64
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# include/uapi/linux/landlock.h, LANDLOCK_ACCESS_FS_*
_WRITE_FILE, _READ_FILE = 1 << 1, 1 << 2
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
_MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
_REFER = 1 << 13       # ABI 2: renaming or linking across directories
_TRUNCATE = 1 << 14    # ABI 3
_WRITES_ABI1 = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
                | _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM)
_FILE_RIGHTS = _WRITE_FILE | _READ_FILE | _TRUNCATE


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (>= 1), or 0 where there is none (not Linux, no
    Landlock, or the syscall is blocked)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    try:
        r = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(r), 0)


def restrict_writes(allowed: list[str]) -> str:
    """Restrict this process and its future children to writing beneath ``allowed`` (existing
    directories) and ``/dev/null``.

    Returns:
        ``"landlock ABI <n>"`` when the sandbox is in force, else ``"none: <reason>"``.
    """
    abi = landlock_abi()
    if abi < 1:
        return "none: Landlock is not available on this system"
    handled = _WRITES_ABI1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    libc = _libc()
    attr = ctypes.c_uint64(handled)   # struct landlock_ruleset_attr's first field only
    fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8),
                      ctypes.c_uint32(0))
    if fd < 0:
        return f"none: landlock_create_ruleset failed ({os.strerror(ctypes.get_errno())})"
    try:
        rules = [(d, handled) for d in allowed if os.path.isdir(d)]
        if os.path.exists(os.devnull):
            rules.append((os.devnull, handled & _FILE_RIGHTS))
        for path, access in rules:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(access, pfd)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    return (f"none: landlock_add_rule on {path} failed "
                            f"({os.strerror(ctypes.get_errno())})")
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"none: PR_SET_NO_NEW_PRIVS failed ({os.strerror(ctypes.get_errno())})"
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return f"none: landlock_restrict_self failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(fd)
    sys.dont_write_bytecode = True    # caches of imported modules could not be written anyway
    return f"landlock ABI {abi}"
