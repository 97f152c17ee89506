"""``geocont.text.encode`` gives the ids of encoding a text whole, though it encodes a batch of paragraphs at a time."""

import torch

from geocont import text


def test_encoding_by_paragraphs_gives_the_ids_of_the_whole_text(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(text, "ENCODE_BATCH", 3)  # several batches
    paragraphs = [
        "In the beginning God created the heaven and the earth.",
        "And the earth was without form, and void;",
        "  indented after a blank line",
        "ends with a space ",
        "\nstarts with a newline",
        "3 numbers 42",
        "tabs\tand\n\n\nthree newlines",
        "über naïve café",
        "x",
    ]
    train = "\n\n".join(paragraphs * 5)
    tokenizer = text.train_tokenizer(text.Corpus("encode-test", train, "", "test"), 300)
    for sample in (train, "", "one paragraph", "a\n\nb", "\n\nleading", "trailing\n\n", "a \n\n b", "a\n\n\n\nb"):
        expected = torch.tensor(tokenizer.encode(sample).ids, dtype=torch.long)
        assert torch.equal(text.encode(tokenizer, sample), expected), repr(sample)
