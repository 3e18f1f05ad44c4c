"""The API server's limits: open connections, idle time, workers, the listen queue, and the request queue.

The ``server`` settings key is a JSON object with any of :class:`ServerLimits`' keys; the others keep their
defaults, which are sized for 1,024 ranks posting heartbeats to one daemon::

    {"connection_limit": 4096, "idle_timeout": "30s", "threads": 8, "backlog": 2048, "queue_limit": 1024}

A leaf beside :mod:`.config_values`: settings read it before any part exists. What each limit does to a client
past it is in docs/operations.md ("Bounds: the front door").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from .durations import parse_duration
from .values import mapping


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """``connection_limit``: open connections before the server stops accepting; ``idle_timeout`` (s): an idle
    keep-alive connection is closed after this; ``threads``: request workers; ``backlog``: the kernel's listen
    queue; ``queue_limit``: requests waiting for a worker past which ingest is answered 503 at once."""

    connection_limit: int = 4096
    idle_timeout: float = 30.0
    threads: int = 8
    backlog: int = 2048
    queue_limit: int = 1024


#: Each key's bounds (an integer's, or a duration's in seconds).
BOUNDS: dict[str, tuple[float, float]] = {
    "connection_limit": (8, 1 << 20),
    "idle_timeout": (1.0, 86400.0),
    "threads": (1, 256),
    "backlog": (1, 65535),
    "queue_limit": (1, 1 << 20),
}


def parse_server_limits(value: Any) -> ServerLimits:
    """A :class:`ServerLimits` from an object (or a JSON string of one, env and flags); ValueError names the key."""
    if isinstance(value, ServerLimits):
        return value
    value = mapping(value)
    known = {f.name for f in fields(ServerLimits)}
    out = {}
    for key, item in value.items():
        if key not in known:
            raise ValueError(f"unknown key {key!r}; known: {', '.join(sorted(known))}")
        out[key] = _number(key, item)
    return ServerLimits(**out)


def _number(key: str, item: Any) -> float | int:
    low, high = BOUNDS[key]
    duration = key == "idle_timeout"
    try:
        if isinstance(item, bool):
            raise ValueError
        if duration:
            number: float | int = parse_duration(item) if isinstance(item, str) else float(item)
        elif isinstance(item, float) and not item.is_integer():
            raise ValueError
        else:
            number = int(item)
    except (TypeError, ValueError):
        raise ValueError(
            f"{key}: must be {'a duration like 30s' if duration else 'an integer'}, got {item!r}"
        ) from None
    if not (math.isfinite(number) and low <= number <= high):
        shown = (f"{low:g}s", f"{high:g}s") if duration else (f"{low:g}", f"{high:g}")
        raise ValueError(f"{key}: must be between {shown[0]} and {shown[1]}, got {item!r}")
    return number
