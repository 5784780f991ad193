"""Fixtures of the real multi-process tests: a synthetic corpus, a private cache, tiny configs,
one torch thread, a hard time limit per test and a check that no stage process survives a test.

Every test that starts processes binds only to 127.0.0.1 (gloo device, FileStore rendezvous) and
leaves none behind: the autouse `no_orphans` fixture scans /proc for processes whose command line
or environment names the test's temporary directory and kills (and reports) any it finds.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "trainer"))  # trainer_helpers: TINY config, synthetic corpus

from trainer_helpers import TINY, synthetic_text  # noqa: E402

TEST_LIMIT_S = 240  # hard bound of one test (SIGALRM); a hung gloo wait fails the test, not the suite


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "synthetic.txt"
    path.write_text(synthetic_text(), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("shardproof-cache")


@pytest.fixture(scope="session")
def tiny(corpus) -> dict:
    return {**TINY, "data": str(corpus)}


def _processes_under(marker: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        if marker in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z":
            out.append(int(entry))
    return out


@pytest.fixture(autouse=True)
def time_limit():
    def expired(signum, frame):
        raise TimeoutError(f"test exceeded {TEST_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory, request) -> Path:
    path = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    yield path
    leftovers = _processes_under(str(path))
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"processes left behind by {request.module.__name__}: {leftovers}"


@pytest.fixture(autouse=True)
def no_orphans(tmp_path):
    yield
    leftovers = _processes_under(str(tmp_path))
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"processes left behind: {leftovers}"


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
