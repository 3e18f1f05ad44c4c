"""Reading the metric tables of docs/metrics.md (shared by the docs and collector_config tests)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
ROW = re.compile(
    r"^\| `(?P<prom>[a-z_0-9]+)` \| `(?P<otel>[a-z_.0-9]+)` \| (?P<unit>[^|]+) \| (?P<type>[^|]+) \| "
    r"(?P<labels>[^|]+) \| (?P<meaning>[^|]+) \|$"
)


def documented() -> dict[str, dict[str, str]]:
    """Rows of the metric tables, by OTel instrument name."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            row = {k: v.strip() for k, v in match.groupdict().items()}
            assert row["otel"] not in rows, f"{row['otel']} documented twice"
            rows[row["otel"]] = row
    return rows


def doc_labels(cell: str) -> set[str]:
    return set() if cell == "—" else {label.strip("*` ") for label in cell.split(",")} - {"le"}
