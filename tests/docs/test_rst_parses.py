"""Every page parses as reStructuredText without a warning (docutils).

A table whose text runs into a column's margin, or a title underline shorter
than its title, is still plain text to the other docs tests; a reST viewer
shows the first as an error block and the second as a paragraph.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import docutils.core
import pytest
from doctext import README, ROOT, pages
from docutils.parsers.rst import Directive, directives


class _Toctree(Directive):
    """Sphinx's ``toctree`` (docs/index.rst), read and not rendered."""

    has_content = True
    optional_arguments = 0
    option_spec: ClassVar[dict[str, Callable[[str | None], object]]] = {
        "maxdepth": directives.unchanged,
        "caption": directives.unchanged,
        "hidden": directives.flag,
    }

    def run(self) -> list[object]:
        return []


directives.register_directive("toctree", _Toctree)


@pytest.mark.parametrize("page", [README, *pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_parses_without_a_warning(page: Path) -> None:
    warnings = io.StringIO()
    docutils.core.publish_doctree(
        page.read_text(),
        source_path=str(page.relative_to(ROOT)),
        settings_overrides={"report_level": 2, "halt_level": 5, "warning_stream": warnings},
    )
    assert warnings.getvalue() == ""
