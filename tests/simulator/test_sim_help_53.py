"""New-user trial 53: ``simulate run`` / ``train`` help (item D), why plain CheckFree ignores
failures (item E), and the real run's event counts (item F). In process, no run."""

from __future__ import annotations

import argparse

import pytest

from simulator.cli import build_parser, ignored_line
from simulator.real_cli import event_counts


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def _sub(*names: str) -> argparse.ArgumentParser:
    p = build_parser()
    for n in names:
        sp = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = sp.choices[n]
    return p


@pytest.mark.parametrize("cmd", [("simulate", "run"), ("simulate", "sweep"), ("train",)])
def test_every_flag_has_help_and_no_default_reads_none(capsys, cmd):
    for a in _sub(*cmd)._actions:
        if a.help != argparse.SUPPRESS:
            assert a.help, (cmd, a.option_strings)
    text = " ".join(_help(capsys, *cmd).split())
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "(default: [])" not in text and "(preset's) (default" not in text
    assert "(default: the preset's)" in text
    # the preset's quick sweep time agrees with the README (~3 min idle), not "~10 min"
    assert "~10 min" not in text and "18 runs: ~3 min on 2 idle cores, 7-15 min shared" in text
    assert ("strategies: no_failure, checkfree, checkfree_plus, checkpoint, redundant, "
            "checkfree_adam, neighbour_copy, gemini, adaptive (docs/trainer.md)") in text


def test_run_and_train_name_their_defaults(capsys):
    run = " ".join(_help(capsys, "simulate", "run").split())
    assert ("--failure-rate FAILURE_RATE failures per stage per iteration (bernoulli: in [0, 1)) "
            "or per stage-hour (hourly) (default: 0.0)") in run
    assert ("--seed SEED seed of the failure schedule and of the trainer (initialisation, data "
            "order) (default: 0)") in run
    assert "--preset {quick,paper,regime,regime-ci,paper-full} defaults for model" in run
    assert "(flags override) (default: quick)" in run
    train = " ".join(_help(capsys, "train").split())
    assert "--strategy STRATEGY a strategy name (listed below; required)" in train
    assert "a failure SIGKILLs the stage's process (default: 0.0)" in train
    assert "--spares SPARES warm standby processes (default: 2)" in train
    assert "--seed SEED seed of the failure schedule" in train and "(default: 0)" in train


def _rec(strategy: dict, rows: list[list[int]]) -> dict:
    return {"strategy": strategy, "rows": [{"failures_ignored": r} for r in rows]}


def test_the_ignored_failures_are_explained():
    from trainer.strategies import make_strategy

    desc = make_strategy("checkfree").describe()
    rec = _rec(desc, [[], [1], [4], [1], [1, 4], []])
    assert ignored_line(rec) == (
        "ignored failures of stages 1 (x3), 4 (x2): outer stages: immune (failures ignored, as "
        "in the paper's runs: stages 1 and S have one neighbour each, so averaging cannot "
        "rebuild them; checkfree_plus can); docs/simulator.md#why-checkfree-ignores-outer-stage-"
        "failures")
    assert ignored_line(_rec(desc, [[], []])) is None
    assert ignored_line(_rec({"name": "x"}, [[2]])) == (
        "ignored failures of stages 2 (x1): the strategy is immune to them; "
        "docs/simulator.md#why-checkfree-ignores-outer-stage-failures")


def test_the_real_run_counts_repeated_events():
    assert event_counts(["Restart"] + ["Transfer"] * 10 + ["Restart"]) == "Restart x2 Transfer x10"
    assert event_counts(["Restart", "Transfer"]) == "Restart Transfer"
    assert event_counts([]) == "-"


def test_only_the_reasons_of_the_stages_ignored_are_given():
    from trainer.strategies import make_strategy

    desc = make_strategy("checkfree").describe()
    assert "embedding" not in ignored_line(_rec(desc, [[1]]))
    only0 = ignored_line(_rec(desc, [[0]]))
    assert "embedding stage: immune" in only0 and "outer stages" not in only0
    both = ignored_line(_rec(desc, [[0, 4]]))
    assert "embedding stage: immune" in both and "outer stages: immune" in both
