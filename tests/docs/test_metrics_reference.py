"""docs/operations.rst, "Metrics": the table lists exactly the catalogue's metrics,
with their types and labels, and names the catalogue as its source."""

from __future__ import annotations

from pathlib import Path

from doctext import section, simple_table

from streamjoin.faust.metrics.catalog import METRICS

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.rst"


def test_the_metrics_table_is_the_catalogue() -> None:
    text = section(OPERATIONS.read_text(encoding="utf-8"), "Metrics")
    rows = simple_table(text, "metric type labels meaning")
    documented = {
        row[0].strip("`"): (row[1], tuple(label.strip() for label in row[2].split(",")))
        for row in rows
    }
    catalogue = {m.name: (m.kind, ("app", *m.labels)) for m in METRICS}
    assert documented == catalogue
    assert "streamjoin/faust/metrics/catalog.py" in text
