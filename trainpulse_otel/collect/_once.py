"""Log a condition the first time it is seen, not on every tick it lasts.

Collectors meet the same missing field or failing call every interval; the
operator needs to hear about it once.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any


class LogOnce:
    """Remembers which keys were logged; logs each key at most once."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: set[Hashable] = set()

    def __call__(self, key: Hashable, level: int, msg: str, *args: Any) -> bool:
        """Log ``msg`` unless ``key`` was logged before; True when it logged now."""
        if key in self._seen:
            return False
        self._seen.add(key)
        self._logger.log(level, msg, *args)
        return True
