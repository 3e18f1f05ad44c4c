"""The failure scanner's finding: what one failure line (or a multi-line report) of a job's output told. Pure data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failure line says: its event kind, details, and the rank or GPU it names (beyond the prefix's).

    ``text``: the line to quote when it is not the line that completed the failure (a traceback's exception
    line, a torchrun entry's fields)."""

    kind: str
    details: Mapping[str, Any]
    rank: int | None = None
    gpu_index: int | None = None
    text: str | None = None
