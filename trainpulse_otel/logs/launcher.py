"""What a launcher says of the job's processes beyond their deaths: that it restarts them, beginning an attempt.

torchrun's elastic agent (PyTorch 1.9 on, and the launchers built on it: NVIDIA's ft_launcher, DLRover) says
``[default] Worker group FAILED. 3/3 attempts left; will restart worker group`` (``UNHEALTHY`` too; DLRover's
``Worker group FAILED, is failure node: False,2/3 attempts left; will restart worker group.``) when a worker
died and ``--max-restarts`` leaves it another try. Pure: one line in, its details out.
"""

from __future__ import annotations

import re
from typing import Any

#: The agent's restart line (see the module); ``role`` in the brackets before it where given.
RESTART = re.compile(
    r"(?:\[(?P<role>[\w.-]+)\] )?Worker group (?P<state>[A-Z]+)[.,]\s*(?:is failure node: \w+,\s*)?"
    r"(?P<remaining>\d+)/(?P<max>\d+) attempts left; will restart worker group"
)
#: The words a line must hold for :func:`workers_restarted` to look (the cheap test first).
MARK = "will restart worker group"


def workers_restarted(text: str) -> dict[str, Any] | None:
    """The agent's restart line's details (``state``, ``remaining``, ``max_restarts``, ``role``), or None."""
    if MARK not in text or (match := RESTART.search(text)) is None:
        return None
    details: dict[str, Any] = {
        "state": match["state"],
        "remaining": int(match["remaining"]),
        "max_restarts": int(match["max"]),
    }
    if match["role"]:
        details["role"] = match["role"]
    return details
