"""Shared fixtures of the trainer tests: a small synthetic corpus, a private cache, tiny configs.

Imported explicitly by each test module (`from trainer_fixtures import ...`). Nothing here
touches the network: every trainer reads the synthetic corpus through `data=`.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from trainer.api import TrainerConfig

WORDS = ("the king queen lord speak thou art love night day sword crown death heart fair sweet good "
         "noble what shall we do my liege o gentle friend come hither go away").split()

TINY = dict(n_stages=4, layers_per_stage=1, d_model=16, n_heads=2, n_kv_heads=1, ffn_hidden=32,
            context=16, micro_batch_size=2, n_micro_batches=2, vocab_size=300, lr=3e-3)


def synthetic_text(n_lines: int = 2500, seed: int = 0) -> str:
    """Seeded pseudo-English lines (about 40k tokens at V = 300)."""
    rng = random.Random(seed)
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))).capitalize() + "."
                     for _ in range(n_lines))


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
