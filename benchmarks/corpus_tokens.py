"""How many tokens an offline corpus gives the `cpu` transformer, per source, and how many epochs of it a `cpu`
run makes.

Method: ``geocont.corpus_census.census_table`` (uncached here, timed whole): the corpus is assembled from the
installed Debian packages (``geocont.corpora``), the `cpu` tokenizer (``geocont.text.train_tokenizer`` at the
`cpu` preset's vocabulary, itself cached in the run cache) is trained on its training split, and each document
is encoded on its own to share the tokens out by source; the ``total`` row is each split as training encodes it
(a split's tokens are its documents' plus two newline tokens between each two). Epochs at a number of steps:
steps x the preset's tokens per step (batch x sequence length) / training tokens.

Usage: python benchmarks/corpus_tokens.py [--corpus offline-english] [--steps 4000 8000 16000 32000]
"""

from __future__ import annotations

import argparse
import time

from geocont import corpus_files
from geocont.chapters.lm_runs import LM_PRESETS
from geocont.corpus_census import CENSUS_CORPORA, census_table, epochs, train_tokens
from geocont.preflight import corpus_problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="offline-english", choices=CENSUS_CORPORA)
    parser.add_argument("--steps", type=int, nargs="+", default=[4000, 8000, 16000, 32000])
    args = parser.parse_args()
    preset = LM_PRESETS["cpu"]
    vocab_size, tokens_per_step = preset["vocab_size"], preset["batch_size"] * preset["max_seq_len"]
    problem = corpus_problem(args.corpus) or corpus_files.corpus_problem(args.corpus)
    if problem:  # a missing or damaged source: one line, before any work
        raise SystemExit(f"error: {problem}")

    started = time.perf_counter()
    census = census_table(args.corpus, vocab_size)
    seconds = time.perf_counter() - started
    total = train_tokens(census)
    sources = census[census["source"] != "total"]
    print(f"corpus {args.corpus}, byte-level BPE of {vocab_size} tokens trained on its training split\n")
    print(
        census.assign(train_share=(100 * sources["train_tokens"] / sources["train_tokens"].sum()).round(1)).to_string()
    )
    print(f"\ncensus: {seconds:.1f} s (assembly, tokenizer where not cached, every document encoded, both splits)\n")
    print(f"cpu run: {preset['batch_size']} x {preset['max_seq_len']} = {tokens_per_step:,} tokens per step")
    for steps in args.steps:
        print(
            f"  {steps:>6,} steps: {steps * tokens_per_step / 1e6:6.1f}M tokens of {total / 1e6:.2f}M = "
            f"{epochs(census, steps * tokens_per_step):.2f} epochs"
        )


if __name__ == "__main__":
    main()
