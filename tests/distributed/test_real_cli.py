"""`shardproof train` / `calibrate` / `--cluster local-real` on bad input: one line, exit 3, no process."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main


@pytest.mark.parametrize("argv, message", [
    (["train", "--strategy", "oobleck"], "unknown strategy 'oobleck'"),
    (["train", "--strategy", "checkfree", "--failure-rate", "1.5"], "outside [0, 1)"),
    (["train", "--strategy", "checkfree", "--stages", "1"], "--stages must be >= 2"),
    (["train", "--strategy", "checkfree", "--iterations", "0"], "--iterations must be >= 1"),
    (["train", "--strategy", "checkfree", "--spares", "-1"], "--spares must be >= 0"),
    (["train", "--strategy", "checkfree", "--data", "/nonexistent/corpus.txt"], "no such file or folder"),
    (["train", "--strategy", "checkfree", "--failure-model", "trace"], "needs a trace file"),
    (["calibrate", "--out", "x.json", "--iterations", "3"], "--iterations must be >= 10"),
    (["simulate", "run", "--strategy", "checkfree", "--cluster", "local-real"], "needs --calibration FILE"),
])
def test_bad_input_exits_3_with_one_line(capsys, argv, message):
    assert main(argv) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err and err.startswith("shardproof: error: ")


def test_local_real_calibration_must_fit_the_stages(capsys, tmp_path):
    from simulator.cluster import Cluster, LinkSpec

    cluster = Cluster(name="local-real", stage_forward_s=(0.1,) * 3, stage_backward_s=(0.2,) * 3, activation_bytes=4,
                      stage_gradient_bytes=(4,) * 3, default_link=LinkSpec(0.0, 1e9), storage_bytes_per_s=1e9,
                      restart_delay_s=0.1, host_cores=2.0, host_load=1.0)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cluster.to_dict()))
    assert main(["simulate", "run", "--strategy", "checkfree", "--cluster", "local-real", "--calibration",
                 str(path)]) == 3
    assert "calibrated for 2 stages, the run has 4" in capsys.readouterr().err
