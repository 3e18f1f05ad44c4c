"""Checks of the plain data a saved state holds (``life_state``), before any of it is trusted. Pure."""

from __future__ import annotations

from typing import Any

#: A number as JSON gives it back.
NUMBER = (int, float)


def is_row(value: Any, *kinds: type | tuple[type, ...]) -> bool:
    """Whether ``value`` is a list with one item of each of ``kinds``, in order (``[time, step, seconds]``)."""
    return (
        isinstance(value, list)
        and len(value) == len(kinds)
        and all(isinstance(item, kind) for item, kind in zip(value, kinds, strict=True))
    )
