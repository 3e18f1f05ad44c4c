"""Serve the API with waitress in a background thread of the daemon's process.

One process keeps the in-process pipeline one: the API thread reads what the
tick thread publishes.

Body limits come in two layers. The app answers 413 for anything over its
``MAX_CONTENT_LENGTH`` once the body has arrived, so the client reads a clean
JSON 413 on a live connection; waitress itself stops reading at
``SERVER_BODY_FACTOR`` times that limit, chunked or not, so no upload is ever
buffered without bound (past it: 413, connection closed). waitress's own
errors (that 413, malformed HTTP, oversized headers) answer in the app's
JSON error shape too.

Responses leave in one write where they fit in ``SEND_BYTES`` (waitress's default sends header and body
apart, which costs an ingest client most of its throughput), and requests are read up to ``RECV_BYTES`` a
``recv()`` (docs/performance.md). ``send_bytes`` is deprecated: used while it exists.

Connections, idle time and workers follow the ``server`` settings (1,024 ranks): reads go ahead
of ingest, ingest past the queue limit gets a 503 (:mod:`.front_door`), the loop runs on epoll
(:mod:`.event_loop`), on the waitress releases :mod:`.waitress_seams` lists (elsewhere: documented options
only). ``limits=None`` is waitress as it comes (a baseline).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import warnings
from typing import Any

from flask import Flask
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import create_server
from waitress.task import ErrorTask

from ..config.limits import ServerLimits
from . import event_loop, waitress_seams
from .front_door import RETRY_AFTER_S, FrontDoorDispatcher, Overloaded, fit_open_files

log = logging.getLogger(__name__)

#: waitress's own body cap, as a multiple of the app's limit (see the module docstring).
SERVER_BODY_FACTOR = 8

#: Output buffered before a worker sends it (see the module docstring); larger responses stream in pieces this big.
SEND_BYTES = 65536
#: What one read of a connection takes at most (see the module docstring).
RECV_BYTES = 65536
#: The ``server`` settings' defaults.
DEFAULT_LIMITS = ServerLimits()


class JsonErrorTask(ErrorTask):
    """waitress's own error responses, as ``{"error": ..., "field": null}`` JSON."""

    def execute(self) -> None:
        error = self.request.error
        if error.code == 413:
            message = f"request body is larger than {self.channel.server.adj.max_request_body_size} bytes"
        elif error.code == 500:
            message = "internal error; the daemon's log has the details"
        else:
            message = f"{error.reason}: {error.body}"
        body = json.dumps({"error": message, "field": None}).encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        if isinstance(error, Overloaded):  # the request was read whole: the connection stays usable
            message = error.body
            self.response_headers.append(("Retry-After", str(RETRY_AFTER_S)))
        else:
            self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class JsonErrorChannel(HTTPChannel):
    """An HTTP channel whose protocol-level errors use :class:`JsonErrorTask`."""

    error_task_class = JsonErrorTask


class ApiServer:
    """A waitress server on ``host:port`` running in a daemon thread."""

    def __init__(
        self, app: Flask, host: str, port: int, limits: ServerLimits | None = DEFAULT_LIMITS, epoll: bool = True
    ) -> None:
        adjustments: dict[str, Any] = {"recv_bytes": RECV_BYTES}
        if app.config.get("MAX_CONTENT_LENGTH"):
            adjustments["max_request_body_size"] = SERVER_BODY_FACTOR * int(app.config["MAX_CONTENT_LENGTH"])
        if hasattr(Adjustments, "send_bytes"):
            adjustments["send_bytes"] = SEND_BYTES
        self.dispatcher: FrontDoorDispatcher | None = None
        tested = waitress_seams.seams_usable()
        seams = tested and limits is not None
        epoll = epoll and seams and event_loop.AVAILABLE
        if epoll:
            adjustments["map"] = event_loop.TrackedMap()
        if limits is not None:
            adjustments.update(_tuned(limits))
        if seams:
            self.dispatcher = FrontDoorDispatcher(limits.queue_limit)  # type: ignore[union-attr]
            self.dispatcher.set_thread_count(limits.threads)  # type: ignore[union-attr]
            adjustments["_dispatcher"] = self.dispatcher
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "send_bytes", DeprecationWarning)
            self._server = create_server(app, host=host, port=port, ident="trainpulse", **adjustments)
        if tested:
            self._server.channel_class = JsonErrorChannel  # type: ignore[union-attr]
        if epoll:
            self._server.asyncore = event_loop  # type: ignore[union-attr]  # waitress calls its .loop()
        if self.dispatcher is not None:
            self.dispatcher.run_in_loop = self._server.trigger.pull_trigger  # type: ignore[union-attr]
        self._thread = threading.Thread(target=self._serve, name="trainpulse-api", daemon=True)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._server.effective_port)  # type: ignore[union-attr]

    @property
    def host(self) -> str:
        return str(self._server.effective_host)  # type: ignore[union-attr]

    def start(self) -> None:
        self._thread.start()
        log.info("API listening on http://%s:%d", self.host, self.port)

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # closing the socket ends run() with EBADF
            self._server.run()

    def close(self) -> None:
        """Stop accepting, let the workers finish, then end the serving loop.

        Workers are stopped first because each one wakes the loop through the
        trigger when it finishes a request; closing the trigger under a busy
        worker would fail in that worker. The close itself runs inside the
        serving loop (through the trigger), so the loop ends at once instead of
        after its poll timeout.
        """
        self._server.accepting = False  # type: ignore[union-attr]
        self._server.task_dispatcher.shutdown(timeout=5)  # type: ignore[union-attr]
        if self._thread.is_alive():
            with contextlib.suppress(OSError):  # the loop already ended and closed its trigger
                self._server.trigger.pull_trigger(self._server.close)  # type: ignore[union-attr]
            self._thread.join(timeout=5)
        else:
            self._server.close()


def _tuned(limits: ServerLimits) -> dict[str, Any]:
    """waitress's adjustments for ``limits``: poll, the limits, and idle connections checked often enough."""
    idle_s = max(1, round(limits.idle_timeout))
    return {
        "asyncore_use_poll": True,
        "connection_limit": fit_open_files(limits.connection_limit),
        "channel_timeout": idle_s,
        "cleanup_interval": max(1, min(10, idle_s // 3)),
        "threads": limits.threads,
        "backlog": limits.backlog,
    }
