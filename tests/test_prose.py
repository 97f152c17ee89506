"""Chapter prose as data (geocont.book.prose): the template files parse, every template a chapter's code
renders exists, and every template in a file is rendered somewhere (no dead prose)."""

import re
from pathlib import Path

import pytest

from geocont.book import prose

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "geocont"
#: Every chapter's templates, and the closing chapter's (``geocont/book/prose.md``).
PROSE_FILES = sorted(PACKAGE.glob(f"chapters/*/{prose.PROSE_FILE}")) + [
    PACKAGE / "chapters" / prose.PROSE_FILE,
    PACKAGE / "book" / prose.PROSE_FILE,
]
#: ``render("name"`` and ``choose("choice"`` in a chapter's code
_RENDERED = re.compile(r"\.(render|choose)\(\s*\"([^\"]+)\"")
#: a string in the code: a claim's key or template, or the reason it was not tested
_QUOTED = re.compile(r"\"([a-z0-9-]+)\"")


def test_parse_reads_headings_and_drops_comments():
    text = "<!-- a note -->\n## a\nOne {x:.2f}\nline two.\n\n## b.yes\n{{literal}} {y}\n"
    assert prose.parse(text) == {"a": "One {x:.2f}\nline two.", "b.yes": "{{literal}} {y}"}
    assert prose.fields("One {x:.2f} {y[0]} {z.real}") == {"x", "y", "z"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("stray\n## a\nx", "before the first"),
        ("## a\nx\n## a\ny", "defined twice"),
        ("## a\nan {unclosed", "not a valid format string"),
    ],
)
def test_parse_rejects_bad_files(text, message):
    with pytest.raises(prose.ProseError, match=message):
        prose.parse(text, "f.md")


def test_render_names_missing_templates_and_values():
    book = prose.Prose("f.md", {"a": "x {n:,}", "c.yes": "y", "c.no": "n"})
    assert book.render("a", n=1234) == "x 1,234"
    assert book.choose("c", "no") == "n"
    assert book.variants("c") == ["yes", "no"]
    with pytest.raises(prose.ProseError, match="no template 'b'; templates: a, c.yes, c.no"):
        book.render("b")
    with pytest.raises(prose.ProseError, match="needs n"):
        book.render("a")


def test_listing():
    assert prose.listing([]) == "none"
    assert prose.listing(["a"]) == "a"
    assert prose.listing(["a", "b", "c"], last="or") == "a, b or c"


@pytest.mark.parametrize("path", PROSE_FILES, ids=lambda p: p.parent.name)
def test_each_chapter_renders_exactly_its_templates(path):
    package = ".".join(path.parent.relative_to(PACKAGE.parent).parts)
    templates = prose.Prose.of(package).templates
    code = "\n".join(p.read_text() for p in path.parent.glob("*.py"))
    rendered = {(kind, name) for kind, name in _RENDERED.findall(code)}
    names = {name for kind, name in rendered if kind == "render"}
    choices = {name for kind, name in rendered if kind == "choose"}
    missing = sorted(n for n in names if n not in templates) + sorted(
        c for c in choices if not any(t.startswith(c + ".") for t in templates)
    )
    assert not missing, f"{path}: rendered but not defined: {missing}"
    # a claim's words (claim.<name>) and a reason it was not tested (not-tested.<reason>) are named in the code
    # as a string: its key, its template or its reason
    named = {f"claim.{n}" for n in _QUOTED.findall(code)} | {f"not-tested.{n}" for n in _QUOTED.findall(code)}
    unused = sorted(t for t in templates if t not in names | named and t.rsplit(".", 1)[0] not in choices)
    assert not unused, f"{path}: defined but never rendered: {unused}"
