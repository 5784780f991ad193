"""The mutant suite of the 2026 bug classes (CASES2.md): mutants of our own, on other models,
plans, axes, factors and sizes than the cases, each of which must be refuted.

``MUTANTS`` is the registry: ``Mutant(name, cls, build)`` with ``build(tmp_dir) -> Problem``.
``tests/bugs/test_mutants2.py`` proves every one (a verdict other than NOT EQUIVALENT is a false
accept if EQUIVALENT, a miss if UNKNOWN) and ``python bench/bug_cases.py --mutants`` reports
the count, the false accepts and the seconds. The class tests (``test_optimizer.py``, ...) check
the same mutants' diverging goals and factors in detail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from spec_lang import AdamW, build_problem, load

ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "examples" / "bugs"

__all__ = ["Mutant", "MUTANTS", "CLASSES"]


@dataclass(frozen=True)
class Mutant:
    """One mutant: its name, its class, and how to build its problem in a scratch directory."""

    name: str
    cls: str
    build: Callable[[Path], Any]


def _variant(case: str, subs: list[tuple[str, str]]) -> Callable[[Path], Any]:
    def build(tmp: Path) -> Any:
        src = (BUGS / f"{case}.py").read_text()
        for old, new in subs:
            if old not in src:
                raise AssertionError(f"{case}: {old!r} not in the file")
            src = src.replace(old, new)
        path = tmp / f"{case}_{abs(hash(tuple(subs))) % 10**8}.py"
        path.write_text(src)
        return load(path)
    return build


def _debug_llama() -> Any:
    from spec_lang.models import DEBUG, llama
    return llama(dataclasses.replace(DEBUG, n_layers=1))


def _adam_counter_zero1(tmp: Path) -> Any:
    from spec_lang.optim import InitStep
    from spec_lang.plans import zero1
    m = _debug_llama()
    plan = dataclasses.replace(zero1(m, dp=2),
                               optimizer_init=(InitStep(lr=0, weight_decay=0),))
    return build_problem(m.spec(AdamW(fresh=True)), plan)


def _norm_in_decay_group(tmp: Path) -> Any:
    from spec_lang.optim import ParamGroups
    from spec_lang.plans import megatron

    def groups(no_decay: tuple[str, ...]) -> ParamGroups:
        return ParamGroups([(lambda n: n.endswith(no_decay), AdamW(weight_decay=0)),
                            (lambda n: not n.endswith(no_decay),
                             AdamW(weight_decay=Fraction(1, 10)))])
    m = _debug_llama()
    plan = dataclasses.replace(megatron(m, tp=2, dp=1, microbatches=1),
                               optimizer=groups(("attention_norm", "ffn_norm")))
    return build_problem(m.spec(groups(("attention_norm", "ffn_norm", "norm"))), plan)


def _muon_blockwise_llama(tmp: Path) -> Any:
    from spec_lang.muon import Muon
    from spec_lang.optim import ParamGroups
    from spec_lang.plans import megatron
    mlp = ("mlp.w1", "mlp.w2", "mlp.w3")

    def groups(mode: str) -> ParamGroups:
        return ParamGroups([(lambda n: n.endswith(mlp), Muon(tp_mode=mode)),
                            (lambda n: not n.endswith(mlp), AdamW())])
    m = _debug_llama()
    plan = dataclasses.replace(megatron(m, tp=2, dp=1, microbatches=1),
                               optimizer=groups("blockwise"))
    return build_problem(m.spec(groups("duplicated")), plan)


def _expert_scale(dp: int, ep: int, power: tuple[tuple[str, int], ...]) -> Callable[[Path], Any]:
    def build(tmp: Path) -> Any:
        from spec_lang.models.moe import MOE_DEBUG, moe
        from spec_lang.plans.expert_parallel import expert_parallel, with_settings
        from spec_lang.plans.megatron import Scale
        m = moe(MOE_DEBUG)
        s = with_settings(expert_grad_scale=Scale("mutant", power, "mutant"))
        return build_problem(m.spec(AdamW()), expert_parallel(m, dp=dp, ep=ep, settings=s))
    return build


def _hsdp_average_twice(tmp: Path) -> Any:
    from spec_lang.plans import ShardedDPSettings, hsdp
    m = _debug_llama()
    plan = hsdp(m, replicate=2, shard=2, settings=ShardedDPSettings(loss_prefactor_axes=()))
    return build_problem(m.spec(AdamW()), plan)


_B46_ADAMW = ("from spec_lang.optim import Adam, InitStep",
              "from spec_lang.optim import AdamW as Adam, InitStep")
_OWN = ("from spec_lang.plans.sharded_dp import FlatBuffer",
        "from spec_lang.plans.sharded_dp import FlatBuffer\nfrom spec_lang.ownership import Ownership")

MUTANTS: list[Mutant] = [
    # -- optimizer semantics ----------------------------------------------------------------
    Mutant("Adam counter advanced by an inert init step (debug Llama, ZeRO-1)", "optimizer",
           _adam_counter_zero1),
    Mutant("AdamW init step: counter reset, weight decay live", "optimizer",
           _variant("B46_fixed", [_B46_ADAMW, ("InitStep(lr=0, weight_decay=0, reset_step=True,",
                                               "InitStep(reset_step=True,")])),
    Mutant("Adam coupled weight decay in the init step's moments", "optimizer",
           _variant("B46_fixed", [("eps=Fraction(1, 10**8), fresh=True)",
                                   "eps=Fraction(1, 10**8), fresh=True, weight_decay=Fraction(1, 10))"),
                                  ("InitStep(lr=0, weight_decay=0, reset_step=True,",
                                   "InitStep(lr=0, reset_step=True,")])),
    Mutant("final norm in the weight-decay group (debug Llama, Megatron TP2)", "optimizer",
           _norm_in_decay_group),
    Mutant("Muon blockwise on the debug Llama's MLP (Megatron TP2)", "optimizer",
           _muon_blockwise_llama),
    Mutant("Muon blockwise at tp=4, F=8", "optimizer",
           _variant("B50_buggy", [('Dim("F", 4)', 'Dim("F", 8)'), ("Mesh(tp=2)", "Mesh(tp=4)")])),
    Mutant("LayerWise owners without the reduced gradient (B45 case 2)", "optimizer",
           _variant("B45_fixed", [_OWN,
                                  ("reduce_grads=lambda name, g: all_reduce(all_reduce(g, DPR), DPS),",
                                   "reduce_grads=lambda name, g: bucket.after_reduce_scatter("
                                   "name, all_reduce(g, DPR), 'sum'),"),
                                  ("optimizer_owners={n: bucket.ownership(n) for n in NAMES})",
                                   "optimizer_owners={n: Ownership(DPS, K, [i % 2]) "
                                   "for i, n in enumerate(NAMES)})")])),
    Mutant("grad=None under SGD with weight decay", "optimizer",
           _variant("B52b_buggy", [("ADAMW = AdamW(lr=Fraction(1, 100), weight_decay=Fraction(1, 10))",
                                    "ADAMW = SGD(lr=Fraction(1, 100), weight_decay=Fraction(1, 10))"),
                                   ("    AdamW, Axis,", "    SGD, AdamW, Axis,")])),
    # -- reductions and groups --------------------------------------------------------------
    Mutant("vocab-parallel CE on gathered logits at tp=4", "reductions",
           _variant("B39_buggy", [("Mesh(tp=2)", "Mesh(tp=4)"), ('Dim("V", 4)', 'Dim("V", 8)')])),
    Mutant("recompute gathered over cp instead of tp", "reductions",
           _variant("B41_buggy", [("DP, TP = Axis.DP, Axis.TP", "DP, TP = Axis.CP, Axis.TP"),
                                  ("Mesh(dp=2, tp=2)", "Mesh(cp=2, tp=2)"),
                                  ("batch = {DP: Shard(B)}", "batch = {DP: Shard(S)}"),
                                  ('Dim("S", 2)', 'Dim("S", 4)')])),
    Mutant("expert grads averaged over expert-DP only (debug MoE, ep=4)", "reductions",
           _expert_scale(1, 4, (("dp", -1),))),
    Mutant("expert divide factor skipped (debug MoE, dp=2 x ep=2)", "reductions",
           _expert_scale(2, 2, ())),
    Mutant("HSDP averages twice (debug Llama, 2 x 2)", "reductions", _hsdp_average_twice),
    Mutant("reported loss reduced over tp instead of cp", "reductions",
           _variant("B67_buggy", [("report=full_tensor_on_tp_mesh(local))",
                                   "report=all_reduce(local, TP))")])),
    # -- MoE and routing --------------------------------------------------------------------
    Mutant("token count read after the in-place all-reduce, ep=4", "moe",
           _variant("B42_buggy", [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("T", 4)', 'Dim("T", 8)')])),
    Mutant("router detached by dist.all_gather, 4 experts on 4 ranks", "moe",
           _variant("B52_buggy", [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'),
                                  ('Dim("T", 4)', 'Dim("T", 8)')])),
    Mutant("router-score partials unsummed, ep=4", "moe",
           _variant("B59_buggy", [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)')])),
    Mutant("sentinel slots in the router gradient, ep=4, 6 tokens", "moe",
           _variant("B68_buggy", [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'),
                                  ('Dim("T", 2)', 'Dim("T", 6)')])),
    # -- loss scaling -----------------------------------------------------------------------
    Mutant("encoder DP 4 over LLM DP 1", "loss scaling",
           _variant("B55_buggy", [("Mesh(dp=2)", "Mesh(dp=4)"), ('Dim("B", 2)', 'Dim("B", 4)')])),
    Mutant("per-rank means at dp=4, one micro-batch", "loss scaling",
           _variant("B65_buggy", [("Mesh(dp=2)", "Mesh(dp=4)"),
                                  ("microbatches(2, B)", "microbatches(1, B)")])),
    Mutant("three unmasked padded classes (V=5, tp=4)", "loss scaling",
           _variant("B77_buggy", [('Dim("V", 3), Dim("P", 1)', 'Dim("V", 5), Dim("P", 3)'),
                                  ("Mesh(tp=2)", "Mesh(tp=4)")])),
    # -- norms and clipping -----------------------------------------------------------------
    Mutant("expert norm de-duplicated by the dense TP group, ep=4", "norms",
           _variant("B60_buggy", [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'),
                                  ("ops.rank_const(EP, [1, 0])", "ops.rank_const(EP, [1, 0, 0, 0])")])),
    Mutant("clip norm per EP group, ep=4", "norms",
           _variant("B62_buggy", [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'),
                                  ('Dim("D", 2)', 'Dim("D", 4)')])),
    # -- DTensor rules, index maps, tied weights --------------------------------------------
    Mutant("view relabelled: [4, 8] Shard(1) -> (16, 2)", "dtensor",
           _variant("B69_buggy", [('R, C, R2, C2 = Dim("R", 4), Dim("C", 4), Dim("R2", 8), Dim("C2", 2)',
                                   'R, C, R2, C2 = Dim("R", 4), Dim("C", 8), Dim("R2", 16), Dim("C2", 2)')])),
    Mutant("view relabelled on 4 ranks: [2, 8] -> (8, 2)", "dtensor",
           _variant("B69_buggy", [('R, C, R2, C2 = Dim("R", 4), Dim("C", 4), Dim("R2", 8), Dim("C2", 2)',
                                   'R, C, R2, C2 = Dim("R", 2), Dim("C", 8), Dim("R2", 8), Dim("C2", 2)'),
                                  ("Mesh(tp=2)", "Mesh(tp=4)")])),
    Mutant("local_map global length on 4 ranks", "dtensor",
           _variant("B71_buggy", [("Mesh(tp=2)", "Mesh(tp=4)"),
                                  ('Dim("X", 6), Dim("XK", 6)', 'Dim("X", 8), Dim("XK", 8)')])),
    Mutant("Replicate backward placement at ep=4", "dtensor",
           _variant("B72_buggy", [("Mesh(ep=2)", "Mesh(ep=4)"), ('Dim("E", 2)', 'Dim("E", 4)'),
                                  ('Dim("T", 4)', 'Dim("T", 8)')])),
    Mutant("min of Partial addends", "dtensor",
           _variant("B73_buggy", [('ops.stop_gradient(ops.max(d["v"], N)),',
                                   'ops.stop_gradient(-ops.max(-d["v"], N)),'),
                                  ('stat = ops.stop_gradient(ops.max(d["v"], N))',
                                   'stat = ops.stop_gradient(-ops.max(-d["v"], N))')])),
    Mutant("norm of Partial addends", "dtensor",
           _variant("B73_buggy", [('ops.stop_gradient(ops.max(d["v"], N)),',
                                   'ops.stop_gradient(ops.sqrt(ops.sum(d["v"] * d["v"]))),'),
                                  ('stat = ops.stop_gradient(ops.max(d["v"], N))',
                                   'stat = ops.stop_gradient(ops.sqrt(ops.sum(d["v"] * d["v"])))')])),
    Mutant("PP all-reduce of other flat offsets", "tied weights",
           _variant("B63_buggy", [('FlatBuffer({"E": (V, H), "W_1": (H, K)}, DP, 2, pad=48)',
                                   'FlatBuffer({"W_1": (H, K), "E": (V, H)}, DP, 2, pad=48)'),
                                  ('FlatBuffer({"W_2": (K, H), "E": (V, H)}, DP, 2)',
                                   'FlatBuffer({"E": (V, H), "W_2": (K, H)}, DP, 2)')])),
    Mutant("tied copies unsynchronised across 4 stages", "tied weights",
           _variant("B64_buggy", [("from spec_lang.schedules import gpipe",
                                   "from spec_lang.schedules import one_f_one_b"),
                                  ('pipe = Pipeline([stage(first, ["E", "W"]), stage(last, ["E"])],\n'
                                   '                schedule=gpipe(pp=2, microbatches=1))',
                                   'def relay(p, d, io):\n    io.send(io.recv())\n\n\n'
                                   'pipe = Pipeline([stage(first, ["E", "W"]), stage(relay, []), '
                                   'stage(relay, []), stage(last, ["E"])],\n'
                                   '                schedule=one_f_one_b(pp=4, microbatches=1))'),
                                  ("Mesh(pp=2), forward=pipe.forward, schedule=pipe",
                                   "Mesh(pp=4), forward=pipe.forward, schedule=pipe")])),
]

CLASSES = sorted({m.cls for m in MUTANTS})
