"""Chapter prose as data: the words live in a file a writer edits; the code only fills them in.

Each chapter's computed sentences are templates in ``src/geocont/chapters/<name>/prose.md``. A level-2
heading names a template, and the text under it, up to the next heading, is the template::

    ## formation.never-formed
    Under SGD the linear net's continuity never formed (mean peak {peak:.2f}, random level
    {baseline:.3f}), so its low final value there is not a fall.

Fields are :meth:`str.format` fields (``{peak:.2f}``, ``{lr:g}``, ``{runs:,}``); a literal brace is
written twice. An HTML comment (``<!-- ... -->``) is a note to the writer and is dropped. A template
whose name has a dot is one variant of a choice (``formation.never-formed``, ``formation.formed``):
the chapter computes which variant applies (a finding, in its ``compute.py``) and its ``present.py``
renders that one with :meth:`Prose.choose`. No decision is taken in a template or in ``present.py``:
they word a finding, they do not make it.

A claim's words are a template named ``claim.<name>`` (the claim's key, or the name its code gives for
a family of keys), one part per line, each part the claims table's column it fills; a part runs on over
the lines that follow it, joined with a space, and ``note`` may be left out::

    ## claim.dose-monotone
    claim: Breaking the symmetry keeps weight continuity: slope 0 (ReLU) above slope 1 (linear)
    quantity: weight v1 |cos|: slope 0 minus slope 1
    paper: higher (no number)
    note: {slopes}

A claim the chapter cannot judge keeps its claim, quantity and paper parts and takes its note (the
reason) from a variant of the ``not-tested`` choice.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The file of a chapter's templates, inside the chapter's package.
PROSE_FILE = "prose.md"

_HEADING = re.compile(r"^## +(\S+) *$")
#: The choice whose variants word the claims (``claim.<name>``), and the parts of each, in the order of the
#: claims table's columns; ``note`` may be left out.
CLAIM_CHOICE = "claim"
#: The choice whose variants word why a claim was not tested (``not-tested.<reason>``).
NOT_TESTED_CHOICE = "not-tested"
CLAIM_PARTS = ("claim", "quantity", "paper", "note")
_REQUIRED_PARTS = CLAIM_PARTS[:3]
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


class ProseError(ValueError):
    """A template file that cannot be read, a missing template, or a template missing a value."""


def parse(text: str, source: str = "<text>") -> dict[str, str]:
    """``{name: template}`` from the text of a prose file (see the module docstring)."""
    templates: dict[str, str] = {}
    name, lines = None, []

    def close() -> None:
        if name is not None:
            templates[name] = "\n".join(lines).strip()

    for line in _COMMENT.sub("", text).splitlines():
        heading = _HEADING.match(line)
        if heading:
            close()
            name, lines = heading.group(1), []
            if name in templates:
                raise ProseError(f"{source}: template {name!r} is defined twice")
        elif name is not None:
            lines.append(line)
        elif line.strip():
            raise ProseError(f"{source}: text before the first '## name' heading: {line.strip()[:60]!r}")
    close()
    for key, template in templates.items():
        try:
            fields(template)
        except ValueError as error:
            raise ProseError(f"{source}: template {key!r} is not a valid format string: {error}") from None
        if key.startswith(CLAIM_CHOICE + "."):
            claim_parts(template, f"{source}: template {key!r}")
    return templates


def claim_parts(template: str, source: str = "<claim>") -> dict[str, str]:
    """``{part: text}`` of a claim template (see the module docstring): each ``part:`` line starts a part, the
    lines after it run on; a template that does not start with a part or lacks a required one raises."""
    parts: dict[str, str] = {}
    current = None
    for line in template.splitlines():
        label, colon, rest = line.partition(":")
        if colon and label in CLAIM_PARTS:
            if label in parts:
                raise ProseError(f"{source}: part {label!r} is given twice")
            current, parts[label] = label, rest.strip()
        elif current is None:
            raise ProseError(f"{source}: a claim template starts with one of {', '.join(CLAIM_PARTS)}")
        elif line.strip():
            parts[current] = f"{parts[current]} {line.strip()}".strip()
    missing = [part for part in _REQUIRED_PARTS if part not in parts]
    if missing:
        raise ProseError(f"{source}: a claim template needs {', '.join(missing)}")
    return parts


@dataclass(frozen=True)
class ClaimWording:
    """The words of one claims-table row."""

    claim: str
    quantity: str
    paper: str
    note: str = ""


def fields(template: str) -> set[str]:
    """The names of the fields a template fills (``{peak:.2f}`` -> ``peak``)."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name}


@dataclass(frozen=True)
class Prose:
    """One chapter's templates."""

    source: str
    templates: Mapping[str, str]

    @classmethod
    def of(cls, package: str) -> Prose:
        """The templates of the chapter package ``package`` (e.g. ``geocont.chapters.condition2``)."""
        return _load(package)

    def render(self, name: str, /, **values: Any) -> str:
        """Template ``name`` filled with ``values``; a missing template or value raises :class:`ProseError`."""
        if name not in self.templates:
            raise ProseError(f"{self.source}: no template {name!r}; templates: {', '.join(self.templates)}")
        template = self.templates[name]
        missing = sorted(fields(template) - set(values))
        if missing:
            raise ProseError(f"{self.source}: template {name!r} needs {', '.join(missing)}")
        return template.format(**values)

    def choose(self, choice: str, variant: str, /, **values: Any) -> str:
        """The ``variant`` of the template ``choice`` (template ``choice.variant``), filled with ``values``."""
        return self.render(f"{choice}.{variant}", **values)

    def claim(self, name: str, /, *, note: bool = True, **values: Any) -> ClaimWording:
        """The words of claim ``name`` (template ``claim.<name>``) filled with ``values``; ``note=False``
        leaves its note unfilled and empty (the row of a claim not tested gives its own)."""
        template = f"{CLAIM_CHOICE}.{name}"
        if template not in self.templates:
            known = ", ".join(self.variants(CLAIM_CHOICE)) or "none"
            raise ProseError(f"{self.source}: no claim {name!r}; claims: {known}")
        parts = claim_parts(self.templates[template], f"{self.source}: template {template!r}")
        if not note:
            parts.pop("note", None)
        missing = sorted(set().union(*(fields(text) for text in parts.values())) - set(values))
        if missing:
            raise ProseError(f"{self.source}: template {template!r} needs {', '.join(missing)}")
        return ClaimWording(**{part: text.format(**values) for part, text in parts.items()})

    def variants(self, choice: str) -> list[str]:
        """The variants the file defines for ``choice``."""
        prefix = choice + "."
        return [name[len(prefix) :] for name in self.templates if name.startswith(prefix)]


@functools.cache
def _load(package: str) -> Prose:
    resource = importlib.resources.files(package) / PROSE_FILE
    source = f"{package.replace('.', '/')}/{PROSE_FILE}"
    try:
        text = resource.read_text(encoding="utf-8")
    except OSError as error:
        raise ProseError(f"cannot read {source}: {error}") from None
    return Prose(source, parse(text, source))


def listing(items: Iterable[Any], last: str = "and", empty: str = "none") -> str:
    """``a, b and c`` (``empty`` for no items)."""
    items = [str(item) for item in items]
    if not items:
        return empty
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {last} " + items[-1]
