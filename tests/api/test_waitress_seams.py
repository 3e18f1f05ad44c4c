"""The front door reaches into waitress only on releases it was tested with; on any other it serves with
waitress's documented options, and this suite fails until the new release is tested and listed."""

from __future__ import annotations

import http.client
import json
import logging
import socket

from tests import parts
from trainpulse_otel.api import ApiServer, waitress_seams
from trainpulse_otel.api.front_door import FrontDoorDispatcher
from trainpulse_otel.config.limits import ServerLimits


def test_the_installed_waitress_is_a_release_the_front_door_was_tested_with():
    version = waitress_seams.installed()
    assert version in waitress_seams.TESTED_WAITRESS, (
        f"waitress {version} is untested: run tests/api and tests/fuzz with it, then add it to TESTED_WAITRESS"
    )


def exchange(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def serve(limits: ServerLimits) -> tuple[ApiServer, object]:
    engine = parts.engine()
    server = ApiServer(parts.app(engine), "127.0.0.1", 0, limits)
    server.start()
    return server, engine


def test_a_tested_release_gets_the_whole_front_door():
    server, engine = serve(ServerLimits())
    try:
        assert isinstance(server.dispatcher, FrontDoorDispatcher)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
            raw.sendall(b"POST /v1/training HTTP/1.1\r\nHost: x\r\nContent-Length: many\r\n\r\n")
            answer = raw.recv(65536).decode()
        assert answer.startswith("HTTP/1.1 400"), answer
        assert json.loads(answer.split("\r\n\r\n", 1)[1])["error"]  # waitress's own error, in the API's shape
    finally:
        server.close()
        engine.close()


def test_an_untested_release_serves_on_documented_options_and_says_what_it_leaves_out(monkeypatch, caplog):
    monkeypatch.setattr(waitress_seams, "installed", lambda: "3.9.0")
    caplog.set_level(logging.WARNING, logger=waitress_seams.__name__)
    server, engine = serve(ServerLimits(threads=2))
    try:
        assert server.dispatcher is None
        assert exchange(server.port, "GET", "/healthz")[0] == 200
        beat = {"ranks": [{"rank": 3, "global_step": 7, "phase": "compute", "pid": 103}]}
        assert exchange(server.port, "POST", "/v1/training", json.dumps(beat).encode())[0] in (200, 202)
        assert exchange(server.port, "POST", "/v1/training", b"{not json")[0] == 400
    finally:
        server.close()
        engine.close()
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "waitress 3.9.0 is not a release" in warned
    assert "503 past server.queue_limit" in warned
