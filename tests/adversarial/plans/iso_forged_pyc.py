"""A plan file forges the bytecode caches of the verdict's code (issue 10 family 6; found while
fixing stop 19's CI, where ``proofs/code_guard.py`` stopped watching ``__pycache__``).

Python loads ``__pycache__/M.cpython-3XX.pyc`` instead of compiling ``M.py`` when the cache's
header carries the source's mtime and size. The plan writes such a header in front of its own
code for every module of ``proofs/``: ``prove``'s self-check runs in a fresh interpreter that
would import them. The forged code leaves a file ``FORGED_RAN`` and prints a false verdict.
The plan itself is wrong (no data-parallel all-reduce), so the right answer is NOT EQUIVALENT.

Safety: the plan writes only into an installation holding a file ``ADV_SANDBOX`` (the test's
throw-away copy of the repository), never into the real one.
"""
import importlib.util
import marshal
import os
import pathlib

import proofs
from spec_lang import SGD, Axis, Dim, Mesh, Plan, Shard, Spec, ops, real

_root = pathlib.Path(proofs.__file__).resolve().parent
if (_root.parent / "ADV_SANDBOX").exists():
    _marker = _root.parent / "FORGED_RAN"
    _code = compile(
        "import os, sys\n"
        f"open({str(_marker)!r}, 'w').write(__name__)\n"
        "print('{\"verdict\": \"EQUIVALENT\"}')\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n", "<forged>", "exec")
    for src in _root.glob("*.py"):
        st = os.stat(src)
        header = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
                  + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                  + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
        pyc = pathlib.Path(importlib.util.cache_from_source(str(src)))
        pyc.parent.mkdir(exist_ok=True)
        tmp = pyc.with_suffix(".forged")
        tmp.write_bytes(header + marshal.dumps(_code))
        os.replace(tmp, pyc)

DP = Axis.DP
B, H = Dim("B", 8), Dim("H", 4)


def loss(p, d):
    return ops.sum(d["x"] * p["w"]) / ops.dim_size(B)


spec = Spec(params={"w": (H,)}, data={"x": real(B, H)}, forward=loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=2), placements={"x": {DP: Shard(B)}}, forward=loss)  # no all_reduce
