"""Which waitress releases the front door may reach into, and what runs on any other.

The front door (:mod:`.front_door`, :mod:`.event_loop`, the JSON error channel in :mod:`.server`) uses parts of
waitress that its documentation does not promise: the ``_dispatcher`` argument of ``create_server``, the
server's ``channel_class``, ``asyncore`` and ``trigger``, a channel's task internals. They are used only on the
releases in :data:`TESTED_WAITRESS`, each run through the API tests (docs/operations.md, "waitress releases").
On any other release the server keeps to waitress's documented adjustments (connections, idle timeout,
threads, backlog, body and read sizes) and says what it leaves out; a test fails on an untested release, so
an upgrade is tested before it ships.
"""

from __future__ import annotations

import logging
from importlib import metadata

log = logging.getLogger(__name__)

#: The waitress releases the API tests passed on with the private seams in use.
TESTED_WAITRESS = ("3.0.0", "3.0.1", "3.0.2")

#: What the server leaves out on an untested release.
LEFT_OUT = "reads ahead of ingest, the 503 past server.queue_limit, the epoll loop and JSON protocol errors"


def installed() -> str:
    """The installed waitress's version ("" when its metadata is missing)."""
    try:
        return metadata.version("waitress")
    except metadata.PackageNotFoundError:
        return ""


def seams_usable(version: str | None = None) -> bool:
    """True when ``version`` (default: the installed one) is a tested release; otherwise warns, once a call."""
    version = installed() if version is None else version
    if version in TESTED_WAITRESS:
        return True
    log.warning(
        "waitress %s is not a release TrainPulse was tested with (%s): serving with waitress's documented "
        "options only, without %s",
        version or "(unknown version)",
        ", ".join(TESTED_WAITRESS),
        LEFT_OUT,
    )
    return False
