"""faust's app and table internals the adapters read: tables' changelogs, tracing tags.

Private attributes it depends on (faust-streaming 0.15.3):

* ``TableManager._changelogs`` (changelog topic name -> its table);
* ``Table._changelog_topic_name()`` (the changelog's name, also before the
  table's changelog topic is created);
* ``App._span_add_default_tags(span)`` (the tags faust puts on its tracing spans).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from faust.app.base import App
    from faust.tables.base import Collection
    from faust.tables.manager import TableManager
    from faust.types import AppT, CollectionT
    from faust.types.tables import TableManagerT
    from opentracing import Span

__all__ = ["add_span_tags", "changelog_topic_name", "changelogs"]


# faust declares these private attributes on its classes (TableManager, Collection,
# App), not on the abstract types (TableManagerT, CollectionT, AppT) the app hands out:
# the casts below name the class that declares each one.


def changelogs(tables: TableManagerT) -> Mapping[str, CollectionT]:
    """Changelog topic name -> table, of faust's table manager *tables*."""
    return cast("TableManager", tables)._changelogs


def changelog_topic_name(table: CollectionT) -> str:
    """The name of *table*'s changelog topic."""
    return str(cast("Collection", table)._changelog_topic_name())


def add_span_tags(app: AppT, span: Span) -> None:
    """Put faust's default tags on a tracing *span*."""
    cast("App", app)._span_add_default_tags(span)
