"""The snapshot: the newest frame and diagnosis in the contract's JSON shape."""

from __future__ import annotations

from typing import Any, Sequence

from .. import __version__
from ..diagnose.types import Diagnosis
from ..samples import Frame, to_dict

#: The contract's snapshot object (``GET /v1/snapshot``).
Snapshot = dict[str, Any]


def build_snapshot(
    frame: Frame | None,
    diagnosis: Diagnosis,
    mode: str,
    collectors: Sequence[str] = (),
    uptime_s: float | None = None,
) -> Snapshot:
    """``{"timestamp", "mode", "gpus", "host", "training", "diagnosis", …}`` for one frame."""
    snapshot: dict[str, Any] = {
        "timestamp": frame.ts if frame else None,
        "mode": mode,
        "collectors": list(collectors),
        "version": __version__,
        "gpus": [to_dict(g) for g in frame.gpus] if frame else [],
        "host": to_dict(frame.host) if frame and frame.host else None,
        "training": to_dict(frame.training) if frame and frame.training else None,
        "diagnosis": diagnosis.to_dict(),
    }
    if uptime_s is not None:
        snapshot["uptime_s"] = round(uptime_s, 3)
    return snapshot
