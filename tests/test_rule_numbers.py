"""The book's text states its rules' numbers; each stated number must be its constant in the code.

Every sentence of the book's text (methods, the notebooks' markdown, the chapters' prose templates) that states a
rule's number in one of the forms below is found, and the number read there is compared with the constant the code
judges by. Changing a rule's constant without its text (or the text without the constant) fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from geocont import instability, statistics

ROOT = Path(__file__).resolve().parents[1]

#: (pattern whose group 1 is a rule's number, the constant it must equal)
STATED = [
    (r"exceeds both ([0-9.]+) and two", statistics.DIFFERENCE_MARGIN),
    (r"difference exceeds both ([0-9.]+)", statistics.DIFFERENCE_MARGIN),
    (r"exceeds ([0-9.]+) and one pooled", statistics.DIFFERENCE_MARGIN / 2),
    (r"when it exceeds ([0-9.]+)\s+and one (?:pooled )?s", statistics.DIFFERENCE_MARGIN / 2),
    (r"more than ([0-9.]+) and two (?:seed|layer-pair) sds", statistics.DIFFERENCE_MARGIN),
    (r"within ([0-9.]+) of the paper's\s+number", statistics.VALUE_TOLERANCE),
    (r"\*partly reproduced\*\s+within ([0-9.]+)", 2.5 * statistics.VALUE_TOLERANCE),
    (r"moved by at most ([0-9.]+) over the last third", statistics.SETTLED_TOLERANCE),
    (r"above its minimum by more than ([0-9.]+)", statistics.VALIDATION_RISE),
    (r"stands more than ([0-9.]+) nats", statistics.VALIDATION_RISE),
    (r"exceeds (\d+)× the running minimum", instability.INSTABILITY_FACTOR),
    (r"above \$(\d+)\\times\$ the running minimum", instability.INSTABILITY_FACTOR),
    (r"memorisation floor of ([0-9]+\.[0-9]+)", instability.MEMORISED_LOSS),
    (r"first trace point whose loss is below ([0-9]+\.[0-9]+)", instability.MEMORISED_LOSS),
    (r"V (?:lies )?within ([0-9.]+) of its random level", statistics.V_LOW_MARGIN),
    (r"of 0\.10 lost over", statistics.DIFFERENCE_MARGIN),
    (r"\(([0-9.]+) at \$d = 256\$,\s+`statistics.random_level_margin`", statistics.random_level_margin(256)),
    (r"\$2\\sqrt\{2\}\\,s_0\$ \(([0-9.]+) at \$d = 128\$ and 3 pairs", statistics.near_random_tolerance(128, 3)),
    (r"floor of ([0-9.]+) \(`statistics.SINGLE_SEED_SD`", statistics.SINGLE_SEED_SD),
    (r"largest mean of (\d+) consecutive", statistics.PEAK_WINDOW),
]


def book_texts() -> dict[str, str]:
    """Every text of the book: methods and the appendix pages, each notebook's markdown, each chapter's prose."""
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "book").glob("*.md")}
    for notebook in (ROOT / "book").glob("*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        texts[str(notebook.relative_to(ROOT))] = "\n\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        )
    for prose in (ROOT / "src" / "geocont").rglob("prose.md"):
        texts[str(prose.relative_to(ROOT))] = prose.read_text()
    return texts


@pytest.mark.parametrize("pattern, constant", STATED, ids=[p for p, _ in STATED])
def test_every_stated_rule_number_is_its_constant(pattern, constant):
    found = [
        (name, match.group(1) if match.groups() else None)
        for name, text in book_texts().items()
        for match in re.finditer(pattern, text)
    ]
    assert found, f"no text states {pattern!r} any more: drop it from STATED or restore the sentence"
    for name, number in found:
        if number is not None:
            assert float(number) == pytest.approx(constant, abs=5e-4), f"{name} states {number}, the code {constant}"
