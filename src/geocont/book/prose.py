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
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import string
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

#: The file of a chapter's templates, inside the chapter's package.
PROSE_FILE = "prose.md"

_HEADING = re.compile(r"^## +(\S+) *$")
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
    return templates


def fields(template: str) -> set[str]:
    """The names of the fields a template fills (``{peak:.2f}`` -> ``peak``)."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name}


@dataclass(frozen=True)
class Prose:
    """One chapter's templates."""

    source: str
    templates: Mapping[str, str]

    @classmethod
    def of(cls, package: str) -> "Prose":
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

    def variants(self, choice: str) -> list[str]:
        """The variants the file defines for ``choice``."""
        prefix = choice + "."
        return [name[len(prefix):] for name in self.templates if name.startswith(prefix)]


@functools.lru_cache(maxsize=None)
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
