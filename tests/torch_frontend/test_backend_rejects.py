"""``backend_rejects``: the collectives gloo raises on, which the fake process group runs
(adversarial round 37a, R37a-2; the slow prove is ``test_round37a.py``).

Each case is traced as the capture traces it (make_fx on the fake world, through
``tracedata``'s encoding, as the parent process reads it) and checked with
:func:`why_rejected`; the same call is made in a one-rank gloo world in a child process (the
ground truth: gloo raises or not), and the two must agree. Groups of more ranks (whose shape
rules gloo applies with ``ws > 1``) are checked on the rules alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives  # noqa: F401 -- the _c10d_functional ops
from torch.fx.experimental.proxy_tensor import make_fx

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.backend_rejects import (WORLD_GROUP, check_collectives,
                                                      why_rejected)
from spec_lang.torch_frontend.capture import Trace
from spec_lang.torch_frontend.tracedata import dump, load_trace
from spec_lang.torch_frontend.world import fake_world

OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")
DTYPES = ("float64", "float32", "bfloat16", "float16", "complex64", "complex128", "int64",
          "int32", "int8", "uint8", "bool", "int16", "uint16", "float8_e4m3fn")
FUNCOL_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum")

# (name, code building the call: ``x`` is a tensor of shape (4,) float32 in both worlds)
SHAPE_CASES = {
    "ag_even": "dist.all_gather_into_tensor(torch.empty(4), x)",
    "ag_longer": "dist.all_gather_into_tensor(torch.empty(5), x)",
    "ag_stacked": "dist.all_gather_into_tensor(torch.empty(1, 4), x)",
    "ag_dtype": "dist.all_gather_into_tensor(torch.empty(4, dtype=torch.float64), x)",
    "rs_even": "dist.reduce_scatter_tensor(torch.empty(4), x)",
    "rs_shorter": "dist.reduce_scatter_tensor(torch.empty(3), x)",
    "rs_2d": "dist.reduce_scatter_tensor(torch.empty(2, 3), x.new_ones(2, 2))",
    "a2a_even": "dist.all_to_all_single(torch.empty(4), x)",
    "a2a_longer": "dist.all_to_all_single(torch.empty(5), x)",
    "a2a_splits": "dist.all_to_all_single(torch.empty(4), x, [3], [4])",
    "a2a_splits_ok": "dist.all_to_all_single(torch.empty(4), x, [4], [4])",
    "bc_root0": "dist.broadcast(x, 0)",
    "reduce_root0": "dist.reduce(x, 0)",
    "ar_list_sizes": "dist.group.WORLD.allreduce([x, x.new_ones(3)]).wait()",
    "fc_ag_size2": "torch.ops._c10d_functional.wait_tensor("
                   "torch.ops._c10d_functional.all_gather_into_tensor(x, 2, '0'))",
    "fc_ag_size1": "torch.ops._c10d_functional.wait_tensor("
                   "torch.ops._c10d_functional.all_gather_into_tensor(x, 1, '0'))",
    "fc_bc_src1": "torch.ops._c10d_functional.wait_tensor("
                  "torch.ops._c10d_functional.broadcast(x, 1, '0'))",
}


def _reduce_case(op: str, dtype: str) -> str:
    red = "dist._make_nccl_premul_sum(0.5)" if op == "PREMUL_SUM" else f"dist.ReduceOp.{op}"
    return f"dist.all_reduce(torch.zeros(4, dtype=torch.{dtype}), op={red})"


def _funcol_case(op: str, dtype: str) -> str:
    return (f"torch.ops._c10d_functional.wait_tensor(torch.ops._c10d_functional.all_reduce("
            f"torch.zeros(4, dtype=torch.{dtype}), {op!r}, '0'))")


CASES = {**{f"ar_{o}_{d}": _reduce_case(o, d) for o in OPS for d in DTYPES},
         **{f"fc_{o}_{d}": _funcol_case(o, d) for o in FUNCOL_OPS
            for d in ("float32", "int64", "bool", "complex64")},
         **SHAPE_CASES}

_GLOO = textwrap.dedent("""
    import json, sys, tempfile, torch, torch.distributed as dist
    import torch.distributed._functional_collectives
    cases = json.loads(sys.stdin.read())
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        out = {}
        for k, code in cases.items():
            x = torch.ones(4)
            try:
                eval(code)
                out[k] = False
            except Exception:
                out[k] = True
        dist.destroy_process_group()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def gloo_raises() -> dict[str, bool]:
    """Whether a one-rank gloo world raises at each case (a child process, 120 s at most)."""
    r = subprocess.run([sys.executable, "-c", _GLOO], input=json.dumps(CASES), text=True,
                       capture_output=True, timeout=120, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _traced(code: str, mesh: dict[str, int] | None = None) -> Trace:
    """``code`` traced on the fake world (one rank of ``mesh``) and read back as the parent
    process reads a capture's trace."""
    mesh = mesh or {"dp": 1}

    def step(x):
        eval(code, {"torch": torch, "dist": dist, "x": x})   # noqa: S307 -- the test's own
        return x + 1

    with fake_world(mesh, {a: 0 for a in mesh}) as w:
        gm = make_fx(step, tracing_mode="fake")(torch.ones(4))
        groups = dict(w.groups)
    tr = Trace(gm, [], [], dict(mesh), {a: 0 for a in mesh}, groups, {})
    return load_trace(dump(tr))


def _verdict(tr: Trace) -> str | None:
    sizes = {WORLD_GROUP: (1, 0), **{name: (1, 0) for name in tr.groups}}
    whys = [why_rejected(n, tr.gm, sizes) for n in tr.gm.graph.nodes]
    return next((w for w in whys if w is not None), None)


@pytest.mark.parametrize("case", sorted(CASES))
def test_rejected_exactly_where_gloo_raises(case, gloo_raises):
    """The rule says "gloo raises" exactly where a real one-rank gloo world raises. A call
    torch's Python wrapper refuses (``BAND`` on a complex tensor: ``ValueError``) raises in
    the capture too: both worlds take the same branch, and gloo must raise there as well."""
    try:
        tr = _traced(CASES[case])
    except (ValueError, RuntimeError):
        assert gloo_raises[case], case
        return
    why = _verdict(tr)
    assert (why is not None) == gloo_raises[case], (case, why, gloo_raises[case])


def test_world_group_name_is_torchs():
    with fake_world({"dp": 2, "tp": 2}, {"dp": 0, "tp": 0}):
        assert dist.group.WORLD.group_name == WORLD_GROUP


def test_two_rank_group_shape_rules():
    """``ws = 2``: an all-gather must stack two inputs, a reduce-scatter halve its input, an
    all-to-all split among two, a root be 0 or 1, a functional group_size be 2."""
    mesh = {"dp": 2}
    want = {
        "dist.all_gather_into_tensor(torch.empty(8), x)": None,
        "dist.all_gather_into_tensor(torch.empty(4), x)": "not the 2 ranks' pieces",
        "dist.reduce_scatter_tensor(torch.empty(2), x)": None,
        "dist.reduce_scatter_tensor(torch.empty(4), x)": "not the 2 ranks' pieces",
        "dist.all_to_all_single(torch.empty(4), x)": None,
        "dist.all_to_all_single(torch.empty(3), x[:3])": "not split among 2 ranks",
        "dist.all_to_all_single(torch.empty(4), x, [1, 3], [2, 2])": "not split among 2",
        "dist.all_to_all_single(torch.empty(4), x, [4], [4])": "not split among 2 ranks",
        "dist.broadcast(x, 1)": None,
        "dist.all_gather([torch.empty(4), torch.empty(4)], x)": None,
        "dist.all_gather([torch.empty(4)] * 3, x)": "not 2 tensors like the input",
        # R38b-3: this rank's own piece differs in and out (gloo's alltoallv); not contiguous;
        # lists of tensors unlike the inputs
        "dist.all_to_all_single(torch.empty(4), x, [2, 2], [1, 3])": "not split among 2",
        "dist.all_to_all_single(torch.empty(4), x, [1, 3], [1, 3])": None,
        "dist.all_to_all_single(torch.empty(5), x, [1, 4], [1, 3])": None,
        "dist.all_to_all_single(torch.empty(2, 2), x.view(2, 2).t())": "not contiguous",
        "dist.all_to_all([torch.empty(2), torch.empty(2)], [x[:2], x[2:]])": None,
        "dist.all_to_all([torch.empty(3), torch.empty(1)], [x[:2], x[2:]])": "lists that are",
    }
    for code, part in want.items():
        tr = _traced(code, mesh)
        sizes = {WORLD_GROUP: (2, 0), **{name: (2, 0) for name in tr.groups}}
        whys = [why_rejected(n, tr.gm, sizes) for n in tr.gm.graph.nodes]
        got = next((y for y in whys if y is not None), None)
        assert (got is None) if part is None else (got is not None and part in got), (code, got)


def test_check_collectives_names_the_line_and_rank():
    tr = _traced("dist.all_reduce(x.new_ones(1), op=dist.ReduceOp.BAND)", {"dp": 2})
    with pytest.raises(PlanError) as e:
        check_collectives("train.py", [tr])
    msg = str(e.value)
    assert "gloo raises for ReduceOp.BAND on a float32 tensor" in msg
    assert "c10d.allreduce_ on the rank at {'dp': 0}" in msg and "caught error" in msg


def test_group_of_unknown_size_is_refused_when_its_size_matters():
    """A group that is no mesh axis, not the world and not a recorded new_group: an
    all-gather over it cannot be checked; a SUM all-reduce over it needs no size but is still
    refused by the group rule (its rank count is unknown)."""
    tr = _traced("dist.all_gather_into_tensor(torch.empty(4), x)")
    whys = [why_rejected(n, tr.gm, {}) for n in tr.gm.graph.nodes]
    assert any(w is not None and "no mesh axis" in w for w in whys), whys


def test_sum_all_reduce_over_the_mesh_is_accepted():
    tr = _traced("dist.all_reduce(x)", {"dp": 2, "tp": 2})
    check_collectives("train.py", [tr])     # no error


MIXED = {   # name -> (function, operand dtypes): the CPU kernel raises on each mixed case
    "mm": (lambda a, b: a @ b, ((2, 3), (3, 4))),
    "addmm": (lambda a, b: torch.nn.functional.linear(a, b.t(), torch.zeros(4, dtype=b.dtype)),
              ((2, 3), (3, 4))),
    "bmm": (lambda a, b: torch.bmm(a, b), ((2, 2, 3), (2, 3, 4))),
}


@pytest.mark.parametrize("name", sorted(MIXED))
@pytest.mark.parametrize("dtypes, mixed", [((torch.float16, torch.bfloat16), True),
                                           ((torch.bfloat16, torch.bfloat16), False),
                                           ((torch.float32, torch.float64), True)])
def test_mixed_dtype_products_refused_where_the_cpu_kernel_raises(name, dtypes, mixed):
    """R47d-4: ``why_mixed_dtypes`` names exactly the traced products whose floating operands
    differ in dtype, and the real CPU kernel raises on those (fake tensors run ``mm`` /
    ``addmm`` of mixed dtypes; ``bmm``'s meta kernel raises itself, as the capture then does)."""
    from spec_lang.torch_frontend.backend_rejects import why_mixed_dtypes

    f, shapes = MIXED[name]
    args = [torch.ones(s, dtype=d) for s, d in zip(shapes, dtypes)]
    try:
        gm = make_fx(f, tracing_mode="fake")(*args)
    except RuntimeError:            # the capture raises too: refused, never EQUIVALENT
        assert mixed and name == "bmm"
        with pytest.raises(RuntimeError):
            f(*args)
        return
    whys = [w for w in (why_mixed_dtypes(n) for n in gm.graph.nodes) if w is not None]
    assert bool(whys) == mixed, whys
    if mixed:
        assert "must have the same dtype" in whys[0]
        with pytest.raises(RuntimeError):
            f(*args)
    else:
        assert f(*args).dtype == dtypes[0]
