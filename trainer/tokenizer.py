"""Byte-level BPE tokenizer trained offline with HuggingFace `tokenizers`, cached on disk.

Byte-level BPE (GPT-2, Radford et al. 2019): text is mapped to its UTF-8 bytes (256-symbol
initial alphabet, so every input is encodable, no unknown token), split by GPT-2's pre-tokenizer
regex, and merged with `vocab_size - 256` learned merges. Training is deterministic given the
corpus; the trained tokenizer is cached as JSON under `cache_dir/tokenizers/` keyed by
(corpus sha256, vocab size), and the encoded corpus under `cache_dir/tokens/` with the same key.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from trainer.errors import TrainerError

__all__ = ["load_or_train_tokenizer", "encode_corpus"]

_CHUNK_CHARS = 1 << 16  # encode in ~64 KiB pieces cut after whitespace (parallel encode_batch)


def _chunks(text: str) -> list[str]:
    """Split `text` into pieces of about _CHUNK_CHARS, each ending after a blank line, newline or space."""
    pieces, start = [], 0
    while start < len(text):
        end = min(start + _CHUNK_CHARS, len(text))
        if end < len(text):
            for sep in ("\n\n", "\n", " "):  # cut after whitespace: pre-tokens never straddle a cut
                cut = text.rfind(sep, start, end)
                if cut > start:
                    end = cut + len(sep)
                    break
        pieces.append(text[start:end])
        start = end
    return pieces


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def load_or_train_tokenizer(text: str, corpus_sha256: str, vocab_size: int, cache_dir: Path):
    """The byte-level BPE `tokenizers.Tokenizer` of `text` with `vocab_size` entries (cached).

    The learned vocabulary can be smaller than `vocab_size` on a tiny corpus (no pair left to
    merge); ids are always < vocab_size, which is what the model's embedding needs.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = cache_dir / "tokenizers" / f"bpe-{corpus_sha256[:16]}-v{vocab_size}.json"
    if path.exists():
        return Tokenizer.from_file(str(path))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    bpe_trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tokenizer.train_from_iterator(_chunks(text), trainer=bpe_trainer, length=None)
    if tokenizer.get_vocab_size() > vocab_size:  # pragma: no cover - library contract
        raise TrainerError(f"tokenizer grew to {tokenizer.get_vocab_size()} > vocab_size {vocab_size}")
    _atomic_write_text(path, tokenizer.to_str())
    return tokenizer


def encode_corpus(text: str, corpus_sha256: str, vocab_size: int, cache_dir: Path) -> np.ndarray:
    """Token ids of the whole corpus, (N,) int64, cached as .npy (uint16 on disk when V <= 65536)."""
    path = cache_dir / "tokens" / f"ids-{corpus_sha256[:16]}-v{vocab_size}.npy"
    if path.exists():
        return np.load(path).astype(np.int64)
    tokenizer = load_or_train_tokenizer(text, corpus_sha256, vocab_size, cache_dir)
    encodings = tokenizer.encode_batch(_chunks(text))
    ids = np.fromiter((i for enc in encodings for i in enc.ids), dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp.npy")
    os.close(fd)
    np.save(tmp, ids.astype(np.uint16 if vocab_size <= 65536 else np.int64))
    os.replace(tmp, path)
    return ids
