"""Plain prose from Perl's POD documentation: what ``perldoc`` shows, without code.

Kept: ordinary paragraphs, headings (``=head1`` ...) and item labels (``=item``; ``=item *`` bullets become ``-``),
with formatting codes rendered as their text (``C<open>`` reads ``open``, ``L<text|perlfunc>`` reads ``text``,
``E<gt>`` reads ``>``). Dropped: verbatim paragraphs (code: they start with white space), ``=for`` paragraphs,
``=begin`` ... ``=end`` regions, index entries (``X<>``), the other commands and anything after ``=cut``.
Lines wrapped inside one paragraph are joined with single spaces; paragraphs are separated by one blank line.
"""

from __future__ import annotations

import html
import re

_COMMAND = re.compile(r"^=([a-zA-Z]+\d*)\s*(.*)$", re.DOTALL)
_MULTI_ANGLE = re.compile(r"([A-Z])<{2,}\s((?:(?![A-Z]<<).)*?)\s>{2,}", re.DOTALL)  # innermost first
_SINGLE_ANGLE = re.compile(r"([A-Z])<([^<>]*)>")
_BULLET = re.compile(r"^(?:\*|\u2022)\s*")
_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}


def plain_text(source: str) -> str:
    """The prose of one POD document (see the module's docstring for what is kept)."""
    kept: list[str] = []
    in_pod, region = True, None  # region: the format of an open =begin
    bullet = ""  # "- " after an "=item *" whose text is the next paragraph
    for paragraph in re.split(r"\n[ \t]*\n", source.expandtabs(8).replace("\r\n", "\n")):
        paragraph = paragraph.strip("\n")
        command = _COMMAND.match(paragraph)
        if command is None:
            if in_pod and region is None and paragraph and not paragraph[0].isspace():
                kept.append(bullet + _rendered(paragraph))
                bullet = ""
            continue
        bullet = ""
        name, text = command.group(1), command.group(2).strip()
        in_pod = name != "cut"
        if name == "begin":
            region = text.split()[0] if text else ""
        elif name == "end":
            region = None
        elif region is None and name.startswith("head"):
            kept.append(_rendered(text))
        elif region is None and name == "item":
            marker = _BULLET.match(text)
            label = _rendered(text[marker.end() :] if marker else text)
            if marker and not label:
                bullet = "- "
            else:
                kept.append(f"- {label}" if marker else label)
    return "\n\n".join(p for p in kept if p)


def _rendered(text: str) -> str:
    """``text`` with its formatting codes rendered and white space collapsed."""
    for pattern in (_MULTI_ANGLE, _SINGLE_ANGLE):
        replaced = 1
        while replaced:
            text, replaced = pattern.subn(lambda m: _code(m.group(1), m.group(2)), text)
    return re.sub(r"\s+", " ", text).strip()


def _code(letter: str, content: str) -> str:
    if letter in "XZ":
        return ""
    if letter == "E":
        if content in _ESCAPES:
            return _ESCAPES[content]
        if re.fullmatch(r"0x[0-9a-fA-F]+", content):
            return chr(int(content, 16))
        if re.fullmatch(r"\d+", content):
            return chr(int(content, 8 if content.startswith("0") else 10))
        return html.unescape(f"&{content};")
    if letter == "L":
        label, bar, _ = content.partition("|")
        if bar:
            return label
        name, _, section = content.partition("/")
        section = section.strip('"')
        return f"{section} in {name}" if name and section else (section or name).strip('"')
    return content
