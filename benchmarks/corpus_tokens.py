"""How many tokens corpus ``offline-english`` gives the `cpu` transformer, per source, and how many epochs of it a
`cpu` run makes.

Method: the corpus is assembled from the installed Debian packages (``geocont.corpora``: cleaning, then
deduplication, each timed); the `cpu` tokenizer (``geocont.text.train_tokenizer`` at the `cpu` preset's vocabulary,
cached in the run cache) is trained on its training split; both splits are encoded as training encodes them
(``geocont.text.encode``, timed); each document is encoded on its own to share the tokens out by source (a split's
tokens are its documents' plus two newline tokens between each two). Epochs at a number of steps: steps x the
preset's tokens per step (batch x sequence length) / training tokens.

Usage: python benchmarks/corpus_tokens.py [--steps 4000 8000 16000 32000]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from geocont import corpora, text
from geocont.chapters.lm_runs import LM_PRESETS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[4000, 8000, 16000, 32000])
    args = parser.parse_args()
    preset = LM_PRESETS["cpu"]
    vocab_size, tokens_per_step = preset["vocab_size"], preset["batch_size"] * preset["max_seq_len"]

    started = time.perf_counter()
    cleaned = corpora.cleaned_documents()
    clean_seconds = time.perf_counter() - started
    documents = corpora.deduplicated(cleaned)
    dedup_seconds = time.perf_counter() - started - clean_seconds
    corpus = corpora.offline_english(documents, corpora.SOURCES)

    started = time.perf_counter()
    tokenizer = text.train_tokenizer(corpus, vocab_size)
    tokenizer_seconds = time.perf_counter() - started
    started = time.perf_counter()
    train_tokens, validation_tokens = (
        len(text.encode(tokenizer, corpus.train)),
        len(text.encode(tokenizer, corpus.validation)),
    )
    encode_seconds = time.perf_counter() - started

    tokens: Counter = Counter()
    for document in documents:
        tokens[document.source, corpora.is_validation(document.id)] += len(text.encode(tokenizer, document.text))
    summaries = corpora.summarise(documents)
    read = Counter(d.source for d in cleaned)

    print(f"corpus {corpora.OFFLINE_ENGLISH}: {corpus.source}")
    print(f"tokenizer: byte-level BPE, {vocab_size} tokens, trained on the training split\n")
    header = (
        f"{'source':<12} {'package':<19} {'licence':<38} {'read':>5} {'kept':>5} {'held':>4} {'words':>10} "
        f"{'train tok':>11} {'valid tok':>10} {'train %':>7}"
    )
    print(header)
    print("-" * len(header))
    for s in summaries:
        train, validation = tokens[s.name, False], tokens[s.name, True]
        print(
            f"{s.name:<12} {s.package:<19} {s.licence:<38} {read[s.name]:>5} {s.documents:>5} "
            f"{s.validation_documents:>4} {s.words:>10,} {train:>11,} {validation:>10,} "
            f"{100 * train / train_tokens:>6.1f}%"
        )
    print("-" * len(header))
    print(
        f"{'total':<12} {'':<19} {'':<38} {len(cleaned):>5} {len(documents):>5} "
        f"{sum(s.validation_documents for s in summaries):>4} {sum(s.words for s in summaries):>10,} "
        f"{train_tokens:>11,} {validation_tokens:>10,}"
    )
    print(
        f"(a split's tokens: its documents' {sum(v for (_, held), v in tokens.items() if not held):,} and "
        f"{sum(v for (_, held), v in tokens.items() if held):,}, plus 2 newline tokens between documents)\n"
    )
    for s in summaries:
        if len(s.licences) > 1:
            print(f"{s.name} documents by licence: " + ", ".join(f"{name} {n}" for name, n in s.licences))
    print(
        f"\nassemble: {clean_seconds + dedup_seconds:.1f} s (read and clean {clean_seconds:.1f} s, deduplicate "
        f"{dedup_seconds:.1f} s); tokenizer {tokenizer_seconds:.1f} s (0 where cached); encode both splits "
        f"{encode_seconds:.1f} s\n"
    )
    print(f"cpu run: {preset['batch_size']} x {preset['max_seq_len']} = {tokens_per_step:,} tokens per step")
    for steps in args.steps:
        print(
            f"  {steps:>6,} steps: {steps * tokens_per_step / 1e6:6.1f}M tokens = "
            f"{steps * tokens_per_step / train_tokens:.2f} epochs"
        )


if __name__ == "__main__":
    main()
