"""Stand-ins for what a monitored job talks to: a rendezvous store, a recorder of what is sent, and a wait."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from waitress.server import create_server


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


class FakeStore:
    """The two calls of ``torch.distributed.Store`` the channel uses, plus set."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value.encode()

    def check(self, keys: list[str]) -> bool:
        return all(k in self.data for k in keys)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return [self.data[k] for k in keys]


class Recorder:
    """A real WSGI server that records each request and answers with ``respond``."""

    def __init__(self, respond: Callable[[dict], tuple[str, bytes]]) -> None:
        self.requests: list[dict[str, Any]] = []
        self._respond = respond
        self._server = create_server(self._app, host="127.0.0.1", port=0, threads=2)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.effective_port}"

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            self._server.run()

    def _app(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        request = {
            "path": environ["PATH_INFO"],
            "auth": environ.get("HTTP_AUTHORIZATION"),
            "json": json.loads(body or b"null"),
        }
        self.requests.append(request)
        status, answer = self._respond(request)
        start_response(status, [("Content-Type", "application/json")])
        return [answer]

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.trigger.pull_trigger(self._server.close)
        self._thread.join(5)
        self._server.task_dispatcher.shutdown()
