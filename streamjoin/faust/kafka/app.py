"""faust's app and table internals the adapters read: tables' changelogs, tracing tags.

Private attributes it depends on (faust-streaming 0.15.3):

* ``TableManager._changelogs`` (changelog topic name -> its table);
* ``Table._changelog_topic_name()`` (the changelog's name, also before the
  table's changelog topic is created);
* ``App._span_add_default_tags(span)`` (the tags faust puts on its tracing spans).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["add_span_tags", "changelog_topic_name", "changelogs"]


def changelogs(tables: Any) -> Mapping[str, Any]:
    """Changelog topic name -> table, of faust's table manager *tables*."""
    found: Mapping[str, Any] = tables._changelogs
    return found


def changelog_topic_name(table: Any) -> str:
    """The name of *table*'s changelog topic."""
    return str(table._changelog_topic_name())


def add_span_tags(app: Any, span: Any) -> None:
    """Put faust's default tags on a tracing *span*."""
    app._span_add_default_tags(span)
