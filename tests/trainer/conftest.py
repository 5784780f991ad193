"""Fixtures of the trainer tests: a small synthetic corpus, a private cache, tiny configs, one thread.

Nothing here touches the network: every trainer reads the synthetic corpus through `data=`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.api import TrainerConfig
from trainer_helpers import TINY, synthetic_text


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "synthetic.txt"
    path.write_text(synthetic_text(), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("shardproof-cache")


@pytest.fixture
def make_config(corpus):
    def make(**overrides) -> TrainerConfig:
        return TrainerConfig(**{**TINY, "data": str(corpus), **overrides})
    return make


@pytest.fixture
def make_trainer(make_config, cache):
    from trainer.pipeline import PipelineTrainer

    def make(**overrides):
        return PipelineTrainer(make_config(**overrides), cache_dir=cache)
    return make


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Tiny tensors gain nothing from intra-op threads, and on a busy 2-core machine OpenMP's
    spinning threads make each op up to 100x slower; run the trainer tests single-threaded."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
