"""Plain prose from reStructuredText (Sphinx) sources: what a reader of the rendered page reads, without code.

Kept: paragraphs, section titles, list items (unordered bullets become ``-``), definition lists, the body of
admonitions (``note``, ``warning``, ``seealso``, ...), the signature and body of object descriptions
(``function``, ``c:macro``, ...), version notes as Sphinx words them ("Changed in version 3.2: ...") and the text
of inline markup (roles, literals, links, emphasis; ``:func:`x``` reads ``x()`` as Sphinx renders it).

Dropped: code (literal blocks after ``::``, ``code-block``, doctest blocks, ``literalinclude``), tables (grid,
simple, ``list-table``, ``flat-table``, ``csv-table``), every other directive with its content (``index``,
``toctree``, ``kernel-doc``, ``image``, ``math``, ...), comments, hyperlink targets, substitution definitions and
references, footnotes and citations, section adornments and file-wide metadata fields (``:orphan:``).

Lines wrapped inside one paragraph are joined with single spaces; paragraphs are separated by one blank line.
"""

from __future__ import annotations

import re

#: Directives whose body is prose; their argument, where they take one, is its first line (a title).
PROSE_DIRECTIVES = frozenset(
    {
        "note",
        "warning",
        "tip",
        "important",
        "attention",
        "caution",
        "danger",
        "error",
        "hint",
        "seealso",
        "admonition",
        "topic",
        "sidebar",
        "impl-detail",
        "glossary",
        "hlist",
        "epigraph",
        "highlights",
        "pull-quote",
        "compound",
        "centered",
        "rubric",
    }
)
#: Directives whose body is prose but whose argument is not (an expression, a class name).
BODY_ONLY_DIRECTIVES = frozenset({"only", "container", "ifconfig"})
#: Object descriptions of Sphinx's default (Python) and standard domains; any ``domain:kind`` also is one.
DESCRIPTION_DIRECTIVES = frozenset(
    {
        "function",
        "class",
        "method",
        "attribute",
        "data",
        "exception",
        "decorator",
        "decoratormethod",
        "classmethod",
        "staticmethod",
        "abstractmethod",
        "coroutinefunction",
        "coroutinemethod",
        "awaitablefunction",
        "property",
        "describe",
        "object",
        "option",
        "cmdoption",
        "envvar",
        "opcode",
        "pdbcommand",
        "2to3fixer",
        "confval",
    }
)
#: Version notes, as Sphinx words them.
VERSION_DIRECTIVES = {
    "versionadded": "New in version {}",
    "versionchanged": "Changed in version {}",
    "deprecated": "Deprecated since version {}",
    "deprecated-removed": "Deprecated since version {}, will be removed in version {}",
}
#: File-wide metadata fields, dropped.
METADATA_FIELDS = frozenset({"orphan", "tocdepth", "nocomments", "nosearch", "private", "public"})
#: Roles Sphinx renders with ``()`` after the name.
CALLABLE_ROLES = frozenset({"func", "meth", "py:func", "py:meth", "c:func"})

_EXPLICIT = re.compile(r"^\s*\.\.(?:\s|$)")
_DIRECTIVE = re.compile(r"^\s*\.\.\s+([A-Za-z0-9]+(?:[-_.:+][A-Za-z0-9]+)*)::+(?:\s+(.*))?$")
_ADORNMENT = re.compile(r"^\s*([!-/:-@\[-`{-~])\1{2,}\s*$")
_GRID_TABLE = re.compile(r"^\s*\+(?:[-=]+\+)+\s*$")
_SIMPLE_TABLE = re.compile(r"^\s*=+(?:\s+=+)+\s*$")
_FIELD = re.compile(r"^:([^:`\s][^:`]*):(?:\s+(.*))?$")
_OPTION = re.compile(r"^:[\w-]+:(?:\s|$)")
_BULLET = re.compile(r"^(?:[-*+\u2022]|\d+[.)]|#\.|\(\d+\)|[a-z][.)])\s+")
_UNORDERED = re.compile(r"^[*+\u2022]\s+")
_INLINE = re.compile(
    r"\\(?P<escaped>.)"
    r"|(?P<role>:(?:[A-Za-z][\w+.-]*:)+)`(?P<role_text>[^`]*)`"
    r"|``(?P<literal>.+?)``"
    r"|`(?P<ref>[^`]+)`__?"
    r"|`(?P<interpreted>[^`]+)`(?::[\w:.+-]+:)?"
    r"|(?<![\w*\\])\*\*(?P<strong>[^\s*]|[^\s*][^*]*?[^\s*])\*\*(?![\w*])"
    r"|(?<![\w*\\])\*(?P<emphasis>[^\s*]|[^\s*][^*]*?[^\s*])\*(?![\w*])"
    r"|\s?\[(?:#[\w-]*|\d+|\*|[A-Za-z][\w.-]*)\]_(?!\w)"
    r"|(?<![\w|])\|[^\s|](?:[^|\n]*?[^\s|])?\|(?:__?)?(?![\w|])"
    r"|(?<![\w\\-])(?P<name>[A-Za-z][A-Za-z0-9-]*)__?(?!\w)"
)
_TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$")


def plain_text(source: str) -> str:
    """The prose of one reST document (see the module's docstring for what is kept)."""
    lines = [line.rstrip() for line in source.replace("\ufeff", "").expandtabs(8).splitlines()]
    return "\n\n".join(_paragraphs(_prose_lines(lines)))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The index after the lines from ``start`` that are blank or indented deeper than ``indent`` (trailing blank
    lines excluded)."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _paragraph_end(lines: list[str], start: int) -> int:
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    return end


def _simple_table_end(lines: list[str], start: int) -> int:
    """The index after a simple table whose top border is ``lines[start]``: after the first later border that ends
    the text (a blank line or the end follows it)."""
    for end in range(start + 1, len(lines)):
        if _SIMPLE_TABLE.match(lines[end]) and (end + 1 == len(lines) or not lines[end + 1].strip()):
            return end + 1
    return len(lines)


def _prose_lines(lines: list[str]) -> list[str]:
    """The lines that carry prose, with their indentation; blank strings separate paragraphs."""
    kept: list[str] = []
    literal_indent: int | None = None  # the previous paragraph ended with '::' at this indentation
    block_ended = True  # a blank line or an explicit markup block came last: a new block may start
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            kept.append("")
            i, block_ended = i + 1, True
            continue
        indent = _indent(line)
        if block_ended or indent != _indent(lines[i - 1]):  # a blank line, or a new indentation, starts a block
            if literal_indent is not None and indent > literal_indent:
                i, literal_indent = _block_end(lines, i, literal_indent), None
                continue
            literal_indent = None
            if _EXPLICIT.match(line):
                end = _block_end(lines, i + 1, indent)
                kept += ["", *_explicit_markup(lines[i:end]), ""]
                i = end
                continue
            block_ended = False
            if line.lstrip().startswith(">>>") or _GRID_TABLE.match(line):
                i = _paragraph_end(lines, i)
                continue
            if _SIMPLE_TABLE.match(line):
                i = _simple_table_end(lines, i)
                continue
        if _ADORNMENT.match(line):
            kept.append("")
            i, block_ended = i + 1, True
            continue
        text = line.strip()
        field = _FIELD.match(text)
        if field:
            if field.group(1).lower() in METADATA_FIELDS:
                i += 1
                continue
            text = f"{field.group(1)}: {field.group(2) or ''}".rstrip()
        elif text.startswith("| ") or text == "|":
            text = text[2:]
        ends_paragraph = i + 1 == len(lines) or not lines[i + 1].strip()
        if ends_paragraph and text.endswith("::"):
            text = text[:-2].rstrip() if text[:-2].endswith((" ", "\t")) or text == "::" else text[:-1]
            literal_indent = indent
        kept.append(" " * indent + text)
        i += 1
    return kept


def _dedented(lines: list[str]) -> list[str]:
    indents = [_indent(line) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return [line[cut:] for line in lines]


def _explicit_markup(block: list[str]) -> list[str]:
    """The prose lines of one explicit markup block (a directive and its body; comments, targets, substitution
    definitions and footnotes give none)."""
    directive = _DIRECTIVE.match(block[0])
    if directive is None:
        return []
    name, argument = directive.group(1).lower(), (directive.group(2) or "").strip()
    body = _dedented(block[1:])
    header_end = next((k for k, line in enumerate(body) if not line.strip()), len(body))
    header, content = body[:header_end], body[header_end:]
    options = [line for line in header if _OPTION.match(line.strip())]
    leading = [line for line in header if line not in options]
    kind = name.split(":")[-1]
    if name in VERSION_DIRECTIVES:
        template = VERSION_DIRECTIVES[name]
        n_versions = template.count("{}")
        words = argument.split(None, n_versions)
        label = template.format(*(words + ["?"] * n_versions)[:n_versions])
        rest = words[n_versions:]
        prose = _prose_lines([*rest, *leading, *content])
        first = next((k for k, line in enumerate(prose) if line.strip()), None)
        if first is None:
            return [f"{label}."]
        prose[first] = f"{label}: {prose[first].strip()}"
        return prose
    if name in PROSE_DIRECTIVES:
        title = [argument, ""] if argument and name in {"admonition", "topic", "sidebar", "rubric"} else []
        lead = [] if title else [argument] if argument else []
        return title + _prose_lines([*lead, *leading, *content])
    if name in BODY_ONLY_DIRECTIVES:
        return _prose_lines([*leading, *content])
    if name in DESCRIPTION_DIRECTIVES or (":" in name and not kind.startswith("namespace")):
        signatures = [s.rstrip("\\").strip() for s in [argument, *leading] if s.strip()]
        return [*signatures, "", *_prose_lines(content)]
    return []


def _paragraphs(lines: list[str]) -> list[str]:
    """Runs of non-blank lines, each a paragraph: a line joins the previous one where it is indented as that
    line's text and starts no list item (in a run that starts with one); inline markup is then rendered and spaces
    collapsed."""
    paragraphs, run = [], []
    for line in [*lines, ""]:
        if line.strip():
            run.append(line)
            continue
        if run:
            text = "\n".join(filter(None, (_inline(joined) for joined in _joined(run))))
            if text:
                paragraphs.append(text)
            run = []
    return paragraphs


def _joined(run: list[str]) -> list[str]:
    joined: list[str] = []
    text_indent = -1
    is_list = _BULLET.match(run[0].strip()) is not None  # as in reST, a paragraph that starts as text holds no list
    for line in run:
        indent, text = _indent(line), line.strip()
        bullet = _BULLET.match(text) if is_list else None
        if joined and bullet is None and indent == text_indent:
            joined[-1] += " " + text
            continue
        joined.append(_UNORDERED.sub("- ", text))
        text_indent = indent + (bullet.end() if bullet else 0)
    return joined


def _inline(text: str) -> str:
    """``text`` with its inline markup rendered as text and runs of spaces collapsed."""
    return re.sub(r"\s+", " ", _INLINE.sub(_render, text)).strip()


def _render(match: re.Match) -> str:
    groups = match.groupdict()
    if groups["escaped"] is not None:
        return "" if groups["escaped"].isspace() else groups["escaped"]
    if groups["role"] is not None:
        return _role_text(groups["role"].strip(":"), groups["role_text"])
    if groups["literal"] is not None:
        return groups["literal"]
    for name in ("ref", "interpreted"):
        if groups[name] is not None:
            titled = _TITLED.match(groups[name])
            return titled.group(1) if titled and titled.group(1) else groups[name]
    for name in ("strong", "emphasis", "name"):
        if groups[name] is not None:
            return groups[name]
    return ""  # footnote and citation references, substitution references


def _role_text(role: str, content: str) -> str:
    titled = _TITLED.match(content)
    if titled and titled.group(1):
        return titled.group(1)
    content = titled.group(2) if titled else content
    if role in {"pep", "rfc"}:
        return f"{role.upper()} {content}"
    if role in {"samp", "file"}:
        content = re.sub(r"(?<!\\)[{}]", "", content)
    content = content.lstrip("!")
    if content.startswith("~"):
        content = content[1:].rsplit(".", 1)[-1]
    if role in CALLABLE_ROLES and content and not content.endswith(")"):
        content += "()"
    return content
