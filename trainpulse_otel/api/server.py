"""Serve the API with waitress in a background thread of the daemon's process.

One process keeps the in-process pipeline one: the API thread reads what the
tick thread publishes.
"""

from __future__ import annotations

import logging
import threading

from flask import Flask
from waitress.server import create_server

log = logging.getLogger(__name__)


class ApiServer:
    """A waitress server on ``host:port`` running in a daemon thread."""

    def __init__(self, app: Flask, host: str, port: int, threads: int = 4) -> None:
        self._server = create_server(app, host=host, port=port, threads=threads, ident="trainpulse")
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
        try:
            self._server.run()
        except OSError:  # closing the socket ends run() with EBADF
            pass

    def close(self) -> None:
        """Stop accepting and end the serving thread.

        The close runs inside the serving loop (through waitress's trigger), so
        the loop wakes and ends at once instead of after its poll timeout.
        """
        if self._thread.is_alive():
            self._server.trigger.pull_trigger(self._server.close)  # type: ignore[union-attr]
            self._thread.join(timeout=5)
        else:
            self._server.close()
        self._server.task_dispatcher.shutdown()  # type: ignore[union-attr]
