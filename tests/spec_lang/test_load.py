"""``spec_lang.load``: the Problem it returns, and every error path (messages start path:line:)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from sl_helpers import goal_mismatches
from spec_lang import load
from spec_lang.errors import PlanError, SpecError
from spec_lang.problem import Goal, Problem
from spec_lang.term import Op, walk

PLANS = Path(__file__).parent / "plans"

HEADER = """\
from spec_lang import *
from spec_lang import ops
from spec_lang.models import DEBUG, llama
model = llama(DEBUG)
d = model.dims
spec = model.spec(SGD(lr=0.01))
"""


def write(tmp_path: Path, body: str, header: str = HEADER) -> str:
    p = tmp_path / "plan.py"
    p.write_text(header + textwrap.dedent(body))
    return str(p)


def line_of(path: str, needle: str) -> int:
    return next(i for i, ln in enumerate(Path(path).read_text().splitlines(), 1) if needle in ln)


def test_debug_tp_dp_plan_loads_and_every_goal_holds() -> None:
    path = str(PLANS / "debug_tp_dp.py")
    pr = load(path)
    assert isinstance(pr, Problem) and pr.path == path and len(pr.source_sha256) == 64
    assert pr.mesh == {"dp": 2, "tp": 2, "mb": 2}
    assert pr.binding["mb"] == 2 and pr.binding["H"] == 16 and pr.binding["T"] == 8
    kinds = [g.kind for g in pr.goals]
    assert kinds[0] == "loss" and kinds == sorted(kinds, key=["loss", "grad", "param",
                                                             "state"].index)
    n_params = 2 + 2 * 9 + 1
    assert len(pr.goals) == 1 + n_params * 4  # loss, grad, param, exp_avg, exp_avg_sq
    g = next(g for g in pr.goals if g.name == "layers.1.mlp.w2")
    assert isinstance(g, Goal) and g.kind == "param" and g.layer == "layers.1"
    assert g.placement == "dp: Replicate(), tp: Shard(F)"
    assert g.expected.op is Op.SHARD and g.expected.attrs == ("F", "tp")
    assert g.site == f"{path}:{line_of(path, 'plan = Plan(')}"
    sites = {g.name: g.site for g in pr.goals}
    assert sites["grad:layers.1.mlp.w2"] == f"{path}:{line_of(path, 'reduce_grads=lambda')}"
    assert sites["loss"] == f"{path}:{line_of(path, 'return Loss(')}"
    for goal in pr.goals:
        assert not any(n.op is Op.REGION for n in walk([goal.expected, goal.actual]))
    # no blanket "every denominator is nonzero": the prover lists the spec's denominators
    # (proofs/denominators.py; tests/bugs/test_denominators.py)
    assert pr.assumptions[0].startswith("equality is over the reals")
    assert not any("RECIP" in a or "nonzero" in a for a in pr.assumptions)
    assert set(pr.spec_outputs) == {g.name for g in pr.goals}
    assert goal_mismatches(pr) == {}
    assert not any(m.startswith("_shardproof_plan_") for m in sys.modules)


def test_debug_tp_sp_plan_every_goal_holds() -> None:
    assert goal_mismatches(load(PLANS / "debug_tp_sp.py")) == {}


def test_zero1_with_clipping_every_goal_holds() -> None:
    pr = load(PLANS / "debug_zero1_clip.py")
    names = {g.name: g for g in pr.goals}
    assert names["grad_norm"].kind == "grad" and names["grad_norm"].placement == "dp: Replicate()"
    assert names["grad:layers.0.mlp.w2"].placement == "dp: Shard(F)"
    assert names["exp_avg:layers.0.mlp.w2"].placement == "dp: Shard(F)"
    assert names["layers.0.mlp.w2"].placement == "dp: Replicate()"
    assert goal_mismatches(pr) == {}


MUTANTS = {
    # name: (plan file, old text, new text, a goal that must differ)
    "dp_avg_instead_of_sum": ("debug_tp_dp.py", 'all_reduce(g, DP, "sum")',
                              'all_reduce(g, DP, "avg")', "grad:output"),
    "copy_to_tp_without_backward_all_reduce": (
        "debug_tp_dp.py", "return copy_to_tp_region(x, TP)",
        'from spec_lang import region; return region(x, "copy_to_tp", "identity", "identity", TP)',
        "grad:layers.0.attention_norm"),
    "token_count_not_reduced_over_mb": ("debug_tp_dp.py", "all_reduce(all_reduce(ops.sum(mask), "
                                        "DP), MB)", "all_reduce(ops.sum(mask), DP)", "loss"),
    "sp_norm_grads_not_reduced": ("debug_tp_sp.py", '        return all_reduce(g, TP, "sum")',
                                  "        return g", "grad:layers.0.ffn_norm"),
    "zero_norm_not_reduced_over_dp": ("debug_zero1_clip.py", "    return all_reduce(local, DP)",
                                      "    return local", "grad_norm"),
    "zero_grads_averaged_not_summed": (
        "debug_zero1_clip.py", "reduce_grads=lambda name, g: reduce_scatter(g, DP, OWNED[name]),",
        "reduce_grads=lambda name, g: reduce_scatter(g, DP, OWNED[name]) / ops.axis_size(DP),",
        "grad:output"),
    "sp_head_gather_with_reduce_scatter_backward": (
        "debug_tp_sp.py", "return gather_from_tp_region(x, d.S, TP)",
        "return gather_from_sp_region(x, d.S, TP)", "grad:norm"),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutants_are_numerically_wrong(name: str, tmp_path: Path) -> None:
    src, old, new, goal = MUTANTS[name]
    text = (PLANS / src).read_text()
    assert old in text
    p = tmp_path / f"{name}.py"
    p.write_text(text.replace(old, new))
    bad = goal_mismatches(load(p))
    assert goal in bad, sorted(bad)


def test_missing_file(tmp_path: Path) -> None:
    p = str(tmp_path / "nope.py")
    with pytest.raises(SpecError, match=f"^{p}:1: cannot read the plan file"):
        load(p)


def test_syntax_error_names_its_line(tmp_path: Path) -> None:
    p = write(tmp_path, "x = 1\nplan = (\n", header="")
    with pytest.raises(SpecError, match=f"^{p}:2: syntax error"):
        load(p)


def test_a_file_too_deep_to_compile_is_bad_input(tmp_path: Path) -> None:
    """Python's compiler raises RecursionError on an expression nested too deeply: the plan
    file's fault, a SpecError naming it (exit 3), not an internal error (R53b-6's DSL twin)."""
    p = write(tmp_path, "x = a" + ".b" * 300000 + "\n", header="")
    with pytest.raises(SpecError, match=f"^{p}:1: the plan file is nested too deeply for "
                       "Python to compile"):
        load(p)


def test_no_spec_and_no_plan(tmp_path: Path) -> None:
    p = write(tmp_path, "x = 1\n", header="")
    with pytest.raises(SpecError, match=f"^{p}:1: the plan file must define `spec = Spec"):
        load(p)
    p = write(tmp_path, "")
    with pytest.raises(PlanError, match=f"^{p}:1: the plan file must define `plan = Plan"):
        load(p)


def test_user_exception_becomes_a_plan_error_at_its_line(tmp_path: Path) -> None:
    p = write(tmp_path, "plan = undefined_name\n")
    with pytest.raises(PlanError, match=f"^{p}:{line_of(p, 'undefined_name')}: NameError"):
        load(p)


def test_shape_error_in_the_plan_forward_names_the_plan_line(tmp_path: Path) -> None:
    p = write(tmp_path, """\
        def forward(p, data):
            x = ops.embedding(data["tokens"], p["tok_embeddings"], d.V)
            a = ops.einsum(x, p["layers.0.mlp.w1"], out=(d.B, d.S, d.F))
            b = ops.einsum(x, p["layers.0.mlp.w3"], out=(d.B, d.S, d.F))
            return ops.sum(a * b)
        plan = Plan(mesh=Mesh(tp=2), forward=forward,
                    placements={"layers.0.mlp.w1": {"tp": Shard(d.F)}})
        """)
    with pytest.raises(PlanError, match=f"^{p}:{line_of(p, 'ops.sum(a * b)')}: mul: dim F is "
                                        r"placed as F\[tp\] in \(B, S, F\[tp\]\) but as F in "
                                        r"\(B, S, F\)"):
        load(p)


def test_all_placement_errors_are_reported_at_once(tmp_path: Path) -> None:
    p = write(tmp_path, """\
        plan = Plan(mesh=Mesh(tp=3), forward=lambda p, data: model.forward(p, data),
                    placements={"layers.0.attn.wq": {"tp": Shard(d.KVH)},
                                "layers.0.mlp.w1": {"tp": Shard(d.F), "cp": Shard(d.H)},
                                "nonexistent": {"tp": Replicate()}})
        """)
    with pytest.raises(PlanError) as e:
        load(p)
    lines = str(e.value).splitlines()
    site = f"{p}:{line_of(p, 'plan = Plan(')}:"
    assert all(ln.startswith(site) for ln in lines), lines
    text = str(e.value)
    assert "placement for 'nonexistent', which is not a spec input" in text
    assert ("layers.0.attn.wq (H=16, KVH=2, G=2, HD=4) puts dim KVH (size 2, 2 per rank before "
            "'tp') on axis 'tp' (size 3); 3 does not divide 2. Pad KVH or shrink 'tp'.") in text
    assert "layers.0.mlp.w1 (H=16, F=24) has a placement on axis 'cp', which is not in the mesh" \
        in text
    assert len(lines) == 3


def test_spec_shape_error_is_a_spec_error(tmp_path: Path) -> None:
    p = write(tmp_path, """\
        bad = Spec(params={"w": (d.H, d.F)}, data={"x": real(d.B, d.H)}, optimizer=SGD(),
                   forward=lambda p, data: ops.sum(ops.einsum(data["x"], p["w"], out=(d.V,))))
        spec = bad
        plan = Plan(mesh=Mesh(dp=2), forward=lambda p, data: 0)
        """)
    with pytest.raises(SpecError, match=f"^{p}:{line_of(p, 'forward=lambda p, data: ops.sum')}: "
                                        r"einsum out dims \['V'\] occur in no operand"):
        load(p)


def test_non_scalar_plan_loss_and_microbatch_divisibility(tmp_path: Path) -> None:
    p = write(tmp_path, """\
        plan = Plan(mesh=Mesh(dp=2), forward=lambda p, data: p["norm"] * 2)
        """)
    with pytest.raises(PlanError, match=f"^{p}:{line_of(p, 'plan = Plan')}: the plan's forward "
                                        "returned .*must be a scalar"):
        load(p)
    p = write(tmp_path, """\
        plan = Plan(mesh=Mesh(dp=2), forward=lambda p, data: model.forward(p, data),
                    placements={"tokens": {"dp": Shard(d.B)}}, microbatches=microbatches(4, d.B))
        """)
    with pytest.raises(PlanError, match="tokens dim B has 2 per rank, which microbatches\\(4\\) "
                                        "does not divide"):
        load(p)


def test_reduce_grads_must_keep_the_local_type(tmp_path: Path) -> None:
    p = write(tmp_path, """\
        plan = Plan(mesh=Mesh(tp=2), forward=lambda p, data: model.forward(p, data),
                    placements={f"layers.0.mlp.{w}": {"tp": Shard(d.F)} for w in ("w1", "w2", "w3")},
                    reduce_grads={"layers.0.mlp.w1": lambda n, g: all_gather(g, "tp", d.F)})
        """)
    with pytest.raises(PlanError, match="the gradient of layers.0.mlp.w1 handed to the optimizer "
                                        r"is \(H, F\); it must have the optimizer's local type "
                                        r"layers.0.mlp.w1 \(H, F\[tp\]\)"):
        load(p)


def test_per_rank_constant_mutant_eps_differs_on_rank_1(tmp_path: Path) -> None:
    """TrainVerify's "per-rank constant change": RMSNorm eps differs on tp rank 1."""
    text = (PLANS / "debug_tp_sp.py").read_text()
    old = "            forward=lambda p, data: model.forward(p, data, MegatronSP()),"
    assert old in text
    new = ("            forward=lambda p, data: llama_forward(p, data, dataclasses.replace(\n"
           "                DEBUG, norm_eps=rank_const(TP, [Fraction(1, 10**5), Fraction(2, 10**5)])),"
           " d, MegatronSP()),")
    p = tmp_path / "eps.py"
    p.write_text("import dataclasses\nfrom fractions import Fraction\nfrom spec_lang import "
                 "rank_const\nfrom spec_lang.models.llama import llama_forward\n"
                 + text.replace(old, new))
    bad = goal_mismatches(load(p))
    assert "loss" in bad and "grad:norm" in bad
    p.write_text(p.read_text().replace("Fraction(2, 10**5)", "Fraction(1, 10**5)"))
    assert goal_mismatches(load(p)) == {}


def test_rank_gives_the_coordinate(tmp_path: Path) -> None:
    p = write(tmp_path, """\
        def forward(p, data):
            return model.forward(p, data) * (1 + rank("dp") - rank("dp"))
        plan = Plan(mesh=Mesh(dp=2), forward=forward,
                    placements={"tokens": {"dp": Replicate()}})
        """)
    pr = load(p)
    assert any(n.op is Op.RANK_CONST and n.attrs == ("dp", (0, 1))
               for n in walk([g.actual for g in pr.goals]))


def test_zero_and_clipping_plan_errors(tmp_path: Path) -> None:
    p = write(tmp_path, """\
        plan = Plan(mesh=Mesh(dp=2), forward=lambda p, data: model.forward(p, data),
                    optimizer_placements={"norm": {"dp": Shard(d.H)}},
                    reduce_grads={"norm": lambda n, g: reduce_scatter(g, "dp", d.H)})
        """)
    with pytest.raises(PlanError, match=r"the optimizer of norm runs on norm \(H\[dp\]\) but the "
                                        r"parameter is norm \(H\); give gather_params"):
        load(p)
    p = write(tmp_path, """\
        spec = model.spec(SGD(), clip_grad_norm=1)
        plan = Plan(mesh=Mesh(dp=2), forward=lambda p, data: model.forward(p, data))
        """)
    with pytest.raises(PlanError, match=r"the spec clips gradients at global norm 1; give "
                                        r"Plan\(grad_norm_sq=...\)"):
        load(p)


def test_a_plan_file_that_exits_is_bad_input_not_a_verdict(tmp_path):
    from spec_lang import load
    from spec_lang.errors import PlanError

    p = tmp_path / "exits.py"
    p.write_text("import sys\nsys.exit(0)\n")
    with pytest.raises(PlanError, match=r"exits\.py:2: the plan file called sys\.exit\(0\)"):
        load(p)


def test_an_inexact_optimizer_constant_names_the_users_line(tmp_path):
    from spec_lang import load
    from spec_lang.errors import SpecLangError

    p = tmp_path / "lr.py"
    p.write_text("from spec_lang.optim import AdamW\n\nopt = AdamW(lr=0.1 + 0.2)\n")
    with pytest.raises(SpecLangError, match=r"lr\.py:3: lr 0\.30000000000000004"):
        load(p)
