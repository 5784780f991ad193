"""A counterexample for a plan with an explicit event order (Plan(schedule=Pipeline |
Accumulation)) names the stage whose gradient buffer diverges, prints that stage's events and
its exact buffer, and points `plan site` at the first buffer hook when the micro-batches enter
the buffer unevenly (docs/parallelism/pipeline.md, "What a counterexample shows")."""

import json
from pathlib import Path

import jsonschema

from proofs.cli import prove_main
from proofs.counterexample import schedule_context
from spec_lang import Axis
from spec_lang.pipeline import Accumulation, Pipeline, stage
from spec_lang.schedules import (B, F, arm_reduction_in_last_forward, collective, one_f_one_b,
                                 reduce_after_last_backward, scale)

ROOT = Path(__file__).resolve().parents[2]
B18 = ROOT / "examples" / "bugs" / "B18_buggy.py"
SCHEMA = json.loads((ROOT / "docs" / "certificate.schema.json").read_text())


def _line(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def test_b18_counterexample_names_stage_events_buffer_and_hook_line(tmp_path, capsys):
    cert = tmp_path / "b18.json"
    assert prove_main([str(B18), "--json", "--certificate", str(cert)]) == 1
    cx = json.loads(capsys.readouterr().out)["counterexample"]
    hook = f"{B18}:{_line(B18, 'schedule=arm_reduction_in_last_forward(')}"
    assert cx["goal"] == "grad:w0" and cx["site"] == hook
    sc = cx["schedule"]
    assert (sc["pipeline"], sc["stage"], sc["chunk"], sc["param"]) == (True, 0, 0, "w0")
    assert sc["events"] == "stage 0: F0 F1 B0 AR_avg[dp] B1"
    assert sc["buffer"] == "AR_avg[dp](g0) + g1"
    assert "AR_avg[dp] (event 3) sees g0" in sc["uneven"] and sc["hook_site"] == hook
    jsonschema.validate(json.loads(cert.read_text()), SCHEMA)

    assert prove_main([str(B18)]) == 1
    out = capsys.readouterr().out
    assert f"  plan site:   {hook}\n" in out
    assert "  schedule:    pp stage 0 holds w0 (1F1B + DDP reduce armed in last forward)" in out
    assert "    stage 0: F0 F1 B0 AR_avg[dp] B1\n" in out
    assert "    gradient buffer after them: AR_avg[dp](g0) + g1\n" in out


def _pipe(sch):
    def nothing(p, d, io):  # never traced here: schedule_context reads the schedule only
        raise AssertionError
    return Pipeline([stage(nothing, ["a", "tied"]), stage(nothing, ["b.", "tied"])], schedule=sch)


def test_even_buffer_keeps_the_site_and_picks_the_holding_stage():
    pipe = _pipe(reduce_after_last_backward(one_f_one_b(pp=2, microbatches=2), Axis.DP, "sum"))
    sc = schedule_context(pipe, "grad:b.w", "grad", {"dp": 0})
    assert (sc["stage"], sc["events"]) == (1, "stage 1: F0 B0 F1 B1 AR_sum[dp]")
    assert sc["buffer"] == "AR_sum[dp](g0 + g1)" and sc["uneven"] == "" and sc["hook_site"] is None
    # optimizer state and updated parameter goals read the same buffer
    assert schedule_context(pipe, "exp_avg:a", "state", {})["stage"] == 0
    assert schedule_context(pipe, "a", "param", {})["stage"] == 0
    # a tied parameter: the diverging rank's pp coordinate chooses the stage
    assert schedule_context(pipe, "grad:tied", "grad", {"pp": 1})["stage"] == 1
    assert schedule_context(pipe, "grad:tied", "grad", {"pp": 0})["stage"] == 0
    # goals that are not a parameter's, unknown parameters, no schedule: nothing to show
    assert schedule_context(pipe, "loss", "loss", {}) is None
    assert schedule_context(pipe, "grad_norm", "grad", {}) is None
    assert schedule_context(None, "grad:a", "grad", {}) is None


def test_uneven_buffer_points_at_the_first_hook():
    pipe = _pipe(arm_reduction_in_last_forward(one_f_one_b(pp=2, microbatches=3), Axis.DP))
    sc = schedule_context(pipe, "grad:b.w", "grad", {})
    # stage 1 (last): F0 B0 F1 B1 F2 B2, the last forward arms the reduction: after B2
    assert sc["events"] == "stage 1: F0 B0 F1 B1 F2 B2 AR_avg[dp]" and sc["uneven"] == ""
    sc = schedule_context(pipe, "grad:a", "grad", {})
    assert sc["events"] == "stage 0: F0 F1 B0 F2 B1 AR_avg[dp] B2"
    assert sc["buffer"] == "AR_avg[dp](g0 + g1) + g2"
    assert "AR_avg[dp] (event 5) sees g0 + g1" in sc["uneven"]
    assert sc["hook_site"].endswith(f"test_schedule_counterexample.py:{_line(Path(__file__), 'pipe = _pipe(arm_reduction')}")

    acc = Accumulation([F(0), B(0), scale(2), F(1), B(1), collective(Axis.DP, "avg")],
                       microbatches=2)
    sc = schedule_context(acc, "grad:w", "grad", {})
    assert sc["pipeline"] is False and sc["events"] == "F0 B0 scale(2) F1 B1 AR_avg[dp]"
    assert sc["buffer"] == "AR_avg[dp](2*g0 + g1)" and "scale(2) (event 2) sees g0" in sc["uneven"]


PIPELINE_MD = ROOT / "docs" / "parallelism" / "pipeline.md"


def _doc_blocks():
    text = PIPELINE_MD.read_text()
    rest = text.split("<!-- worked-example: reduce-before-last-backward", 1)[1]
    code = rest.split("```python\n", 1)[1].split("```", 1)[0]
    output = rest.split("and `prove` answers (values elided):\n\n```\n", 1)[1].split("```", 1)[0]
    return code, output


def test_pipeline_md_worked_example_runs_and_prints_what_the_doc_shows(tmp_path, capsys):
    code, shown = _doc_blocks()
    plan = tmp_path / "plan.py"
    plan.write_text(code)
    assert prove_main([str(plan)]) == 1
    out = capsys.readouterr().out.replace(str(plan), "plan.py")
    for line in shown.splitlines():
        if "sizes ..." in line or line.strip() == "...":
            continue
        assert line + "\n" in out, (line, out)
    # the fix the doc names: the reduction after the last backward
    fixed = code.replace('return [*events[:last_b], collective(DP, "avg"), *events[last_b:]]',
                         'return [*events, collective(DP, "avg")]')
    assert fixed != code
    plan.write_text(fixed)
    assert prove_main([str(plan)]) == 0, capsys.readouterr().out
