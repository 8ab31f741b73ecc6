"""Reading README.rst and the docs/ pages: headings, sections, links, literals, tables.

A small reStructuredText reader for the consistency tests (docutils is not a
dependency): enough to follow the text to where it lives and to pull out what
the tests compare with the code.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.rst"
DOCS = ROOT / "docs"
EXAMPLE_README = ROOT / "examples" / "ad_monetization" / "README.md"

_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+])\1+$")


def pages() -> list[Path]:
    """Every reStructuredText page under docs/."""
    return sorted(DOCS.glob("*.rst"))


def all_texts() -> dict[Path, str]:
    """README.rst, every docs page and the example's README, by path."""
    return {p: p.read_text() for p in [README, *pages(), EXAMPLE_README]}


@dataclass(frozen=True)
class Heading:
    line: int
    title: str
    style: tuple[str, bool]  # adornment character, overlined


def headings(text: str) -> list[Heading]:
    """Section titles in document order (underlined, or over- and underlined)."""
    lines = text.splitlines()
    found = []
    for i in range(len(lines) - 1):
        title, under = lines[i].strip(), lines[i + 1]
        if not title or _ADORNMENT.match(title) or not _ADORNMENT.match(under):
            continue
        if len(under) < len(title) or lines[i].startswith(" "):
            continue
        over = i > 0 and lines[i - 1] == under
        found.append(Heading(i, title, (under[0], over)))
    return found


def slug(title: str) -> str:
    """The id docutils gives a section title (what ``page.rst#id`` links to)."""
    plain = title.replace("``", "").replace("`", "")
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")


def section(text: str, title: str) -> str:
    """The text of the section *title*: up to the next heading of its level or above."""
    heads = headings(text)
    levels: list[tuple[str, bool]] = []
    for h in heads:
        if h.style not in levels:
            levels.append(h.style)
    matches = [h for h in heads if h.title == title]
    assert len(matches) == 1, f"{len(matches)} sections titled {title!r}"
    start = matches[0]
    level = levels.index(start.style)
    lines = text.splitlines()
    end = len(lines)
    for h in heads:
        if h.line > start.line and levels.index(h.style) <= level:
            end = h.line - (1 if h.style[1] else 0)
            break
    return "\n".join(lines[start.line : end]) + "\n"


def inline_literals(text: str) -> list[str]:
    """The contents of every ````literal````."""
    return re.findall(r"``(.+?)``", text, re.S)


def literal_blocks(text: str) -> list[str]:
    """Every literal block (after ``::``), dedented, relative indentation kept."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip().endswith("::"):
            indent = len(lines[i]) - len(lines[i].lstrip())
            body = []
            j = i + 1
            while j < len(lines) and (
                not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
            ):
                body.append(lines[j])
                j += 1
            if j > i + 1 and lines[i].lstrip().startswith(".. ") and "code-block" not in lines[i]:
                pass  # a directive (contents, toctree): options, not a literal
            else:
                block = textwrap.dedent("\n".join(body)).strip("\n")
                if block.strip():
                    blocks.append(block)
            i = j
        else:
            i += 1
    return blocks


def literal_text(text: str) -> list[str]:
    """Inline literals and literal-block lines: where commands and paths are written."""
    block_lines = [line.strip() for b in literal_blocks(text) for line in b.splitlines()]
    return inline_literals(text) + [line for line in block_lines if line]


def links(text: str) -> list[tuple[str, str]]:
    """``(label, target)`` of every embedded-URI reference ```label <target>`_``."""
    return re.findall(r"`([^`<]*?)\s*<([^<>`]+)>`__?", text)


def named_references(text: str) -> list[str]:
    """Every ```Title`_`` reference without an embedded target."""
    without_links = re.sub(r"`[^`<]*?<[^<>`]+>`__?", "", text)
    without_literals = re.sub(r"``.+?``", "", without_links, flags=re.S)
    return [" ".join(r.split()) for r in re.findall(r"(?<!`)`([^`<>]+)`_(?!_)", without_literals)]


def markdown_links(text: str) -> list[str]:
    """Targets of every ``[label](target)`` link."""
    return re.findall(r"\]\(([^)\s]+)\)", text)


def markdown_slug(title: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    plain = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return plain.replace(" ", "-")


def simple_table(text: str, header: str) -> list[list[str]]:
    """Body rows of the simple table whose header row has the words of *header*."""
    lines = text.splitlines()
    rule = re.compile(r"=+( +=+)+")
    heads = [i for i, line in enumerate(lines) if line.split() == header.split()]
    assert heads, f"no table with the header {header!r}"
    h = heads[0]
    assert rule.fullmatch(lines[h - 1].rstrip()), f"{header!r} is not a table header"
    closing = [i for i in range(h + 2, len(lines)) if rule.fullmatch(lines[i].rstrip())]
    assert rule.fullmatch(lines[h + 1].rstrip()) and closing, f"table {header!r} is not closed"
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", lines[h - 1])]
    rows = []
    for line in lines[h + 2 : closing[0]]:
        cells = []
        for k, (a, _) in enumerate(spans):
            end = None if k == len(spans) - 1 else spans[k + 1][0]
            cells.append(line[a:end].strip())
        rows.append(cells)
    return rows


def strip_json_blocks(text: str) -> str:
    """*text* without its ``.. code-block:: json`` bodies."""
    return re.sub(r"\.\. code-block:: json\n\n(?:    .*\n|\n)+", "", text)


def json_blocks(text: str) -> list[str]:
    """The bodies of the ``.. code-block:: json`` directives."""
    return re.findall(r"\.\. code-block:: json\n\n((?:    .*\n|\n)+)", text)
