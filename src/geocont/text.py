"""Text corpora and tokenizers for the transformer chapters.

* ``kjv``: the King James Bible (public domain, ~0.8M words) from the Debian packages
  ``bible-kjv`` and ``bible-kjv-text`` (the ``bible`` program dumps the text); offline.
* ``wikitext-103``: WikiText-103 (raw) through the ``datasets`` library, where a network
  or a local Hugging Face cache exists; the paper's corpus.
* ``offline-english``: six Debian packages' English prose, deduplicated; offline. Assembled by
  :mod:`geocont.corpora`, which also says each source's licence and share.

Splits are deterministic (by chapter for ``kjv``, by a hash of the document's id for ``offline-english``). A
corpus saved with :func:`save_corpus` into ``$GEOCONT_CORPUS_DIR`` is read from there first. Tokenizers are
byte-level BPE trained on the training split only, cached by corpus and vocabulary size. docs/design.md ("Text
corpora") gives the corpora's sizes and splits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path

import torch

from .cache import cache_root
from .kjv import KJV_RANGE, VALIDATION_EVERY, Corpus, CorpusNotAvailable, bible_program, kjv_chapters

CORPORA: tuple[str, ...] = ("kjv", "wikitext-103", "offline-english")


def check_corpus_name(name: str) -> None:
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; valid choices: {', '.join(CORPORA)}")


def _load_kjv() -> Corpus:
    program = bible_program()
    chapters = [verses for _, verses in kjv_chapters()]
    train = [c for i, c in enumerate(chapters) if i % VALIDATION_EVERY != VALIDATION_EVERY - 1]
    validation = [c for i, c in enumerate(chapters) if i % VALIDATION_EVERY == VALIDATION_EVERY - 1]
    return Corpus(
        "kjv", "\n\n".join(train), "\n\n".join(validation), f"`{program} {KJV_RANGE}` (Debian bible-kjv-text)"
    )


def _load_wikitext() -> Corpus:
    try:
        import datasets

        data = datasets.load_dataset("Salesforce/wikitext", "wikitext-103-raw-v1")
    except Exception as error:  # noqa: BLE001 - any failure here means "not available"
        raise CorpusNotAvailable(
            f"WikiText-103 could not be loaded through `datasets` ({type(error).__name__}: {error}). It needs a "
            "network or a local Hugging Face cache (HF_HOME); offline, use corpus='kjv'."
        ) from error
    return Corpus(
        "wikitext-103",
        "".join(data["train"]["text"]),
        "".join(data["validation"]["text"]),
        "Salesforce/wikitext wikitext-103-raw-v1 via datasets",
    )


def saved_corpus_path(name: str) -> Path | None:
    """``$GEOCONT_CORPUS_DIR/<name>.json``, where that variable is set."""
    directory = os.environ.get("GEOCONT_CORPUS_DIR")
    return Path(directory) / f"{name}.json" if directory else None


def save_corpus(corpus: Corpus, directory: Path) -> Path:
    """Write ``corpus`` (both splits) as ``directory/<name>.json``, for ``$GEOCONT_CORPUS_DIR``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{corpus.name}.json"
    path.write_text(json.dumps(dataclasses.asdict(corpus)))
    return path


def read_saved_corpus(path: Path, name: str) -> Corpus:
    """The corpus ``name`` saved at ``path`` by :func:`save_corpus`; where the file is not one (unreadable, not
    JSON, fields missing or not text, another corpus, no training text), a :class:`CorpusNotAvailable` naming
    the file and how to rebuild it."""
    try:
        fields = json.loads(path.read_text())
        corpus = Corpus(**fields) if isinstance(fields, dict) else None
        if corpus is None:
            raise ValueError(f"a JSON {type(fields).__name__}, not an object")
        wrong = [f.name for f in dataclasses.fields(Corpus) if not isinstance(getattr(corpus, f.name), str)]
        if wrong:
            raise ValueError(f"field(s) {', '.join(wrong)} not text")
        if corpus.name != name or not corpus.train:
            raise ValueError(f"corpus {corpus.name!r}" if corpus.name != name else "no training text")
    except (OSError, ValueError, TypeError) as error:
        raise CorpusNotAvailable(
            f"the saved corpus {path} is unreadable ({type(error).__name__}: {error}); delete it (corpus {name} is "
            f"then read from its source), or rebuild it where the corpus exists: `env -u GEOCONT_CORPUS_DIR python "
            f"scripts/paper_gpu.py prepare DIR` writes DIR/corpora/{name}.json"
        ) from None
    return corpus


def load_corpus(name: str) -> Corpus:
    """A corpus by name, split into training and validation text (a saved copy first, see above)."""
    check_corpus_name(name)
    saved = saved_corpus_path(name)
    if saved is not None and saved.exists():
        return read_saved_corpus(saved, name)
    if name == "offline-english":
        from .corpora import load_offline_english

        return load_offline_english()
    return _load_kjv() if name == "kjv" else _load_wikitext()


def train_tokenizer(corpus: Corpus, vocab_size: int):
    """Byte-level BPE trained on ``corpus.train``, cached under the run cache."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    digest = hashlib.sha256(corpus.train.encode()).hexdigest()[:16]
    path = cache_root() / "tokenizers" / f"{corpus.name}-{vocab_size}-{digest}.json"
    if path.exists():
        return Tokenizer.from_file(str(path))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(corpus.train.split("\n\n"), trainer=trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")  # one per process: sweep workers may race here
    tokenizer.save(str(partial))
    partial.replace(path)
    return tokenizer


#: Paragraphs :func:`encode` hands the tokenizer at once.
ENCODE_BATCH = 4096


def encode(tokenizer, text: str) -> torch.Tensor:
    """Token ids of a text under a :func:`train_tokenizer` tokenizer as one long tensor: the ids of encoding it
    whole, computed a batch of paragraphs at a time.

    The text is cut at each blank line between two non-space characters, where the byte-level pre-tokenizer cuts
    too (one piece per newline), so the ids are the same. Encoded whole, a corpus of tens of MB holds every token's
    string and offsets at once (5.7 GB for 12M tokens); a batch holds a few MB.
    """
    paragraphs = re.split(r"(?<=\S)\n\n(?=\S)", text)
    blank_line = tokenizer.encode("\n").ids * 2
    batches: list[torch.Tensor] = []
    for start in range(0, len(paragraphs), ENCODE_BATCH):
        ids: list[int] = []
        for index, encoding in enumerate(tokenizer.encode_batch(paragraphs[start : start + ENCODE_BATCH]), start):
            ids += blank_line if index else []
            ids += encoding.ids
        batches.append(torch.tensor(ids, dtype=torch.long))
    return torch.cat(batches)
