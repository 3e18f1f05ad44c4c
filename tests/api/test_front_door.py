"""The front door holds: idle and keep-alive connections by the hundred leave the API answering, reads go
ahead of queued ingest, and ingest past the queue limit is a prompt 503 naming the limit, with Retry-After."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from flask import Flask, request

from tests import parts
from trainpulse_otel.api import ApiServer
from trainpulse_otel.config.limits import ServerLimits

JSON = {"Content-Type": "application/json"}


def heartbeat(rank: int) -> bytes:
    return json.dumps({"ranks": [{"rank": rank, "global_step": 7, "phase": "compute", "pid": 100 + rank}]}).encode()


def get(port: int, path: str, timeout: float) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_300_idle_connections_leave_healthz_answering_within_a_second(served):
    idle = [socket.create_connection(("127.0.0.1", served.server.port), timeout=5) for _ in range(300)]
    try:
        started = time.monotonic()
        assert get(served.server.port, "/healthz", timeout=1.0) == 200
        assert time.monotonic() - started < 1.0
    finally:
        for sock in idle:
            sock.close()


def test_200_keep_alive_ranks_are_all_accepted_and_snapshot_still_answers(served):
    conns = [http.client.HTTPConnection("127.0.0.1", served.server.port, timeout=5) for _ in range(200)]
    try:
        for beat in range(2):  # the second round goes over the same connections: none was dropped
            for rank, conn in enumerate(conns):
                conn.request("POST", "/v1/training", heartbeat(rank), JSON)
                response = conn.getresponse()
                response.read()
                assert response.status == 202, (beat, rank)
        assert get(served.server.port, "/healthz", timeout=1.0) == 200
        served.engine.tick()
        _, snap = served.get_json("/v1/snapshot")
        assert len(snap["training"]["ranks"]) == 200
    finally:
        for conn in conns:
            conn.close()


@pytest.fixture
def one_worker() -> Iterator[tuple[ApiServer, threading.Event, list[str]]]:
    """A server with one worker and a queue limit of one; ``GET /hold`` keeps that worker until released.
    The list is the order in which the app saw requests."""
    engine = parts.engine()
    app: Flask = parts.app(engine)
    release, seen = threading.Event(), []
    app.before_request(lambda: seen.append(f"{request.method} {request.path}"))
    app.add_url_rule("/hold", "hold", lambda: "held" if release.wait(10) else "timeout")
    server = ApiServer(app, "127.0.0.1", 0, ServerLimits(threads=1, queue_limit=1))
    server.start()
    yield server, release, seen
    release.set()
    server.close()
    engine.close()


def post_later(port: int, rank: int, results: dict[int, int]) -> threading.Thread:
    def post() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/training", heartbeat(rank), JSON)
        results[rank] = conn.getresponse().status
        conn.close()

    thread = threading.Thread(target=post)
    thread.start()
    return thread


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_ingest_past_the_queue_limit_is_a_prompt_503_naming_it(one_worker):
    server, release, seen = one_worker
    port, dispatcher = server.port, server.dispatcher
    held = threading.Thread(target=get, args=(port, "/hold", 10))
    held.start()
    wait_for(lambda: seen == ["GET /hold"])
    results: dict[int, int] = {}
    queued = post_later(port, 0, results)
    wait_for(lambda: len(dispatcher.queue) == 1)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    started = time.monotonic()
    conn.request("POST", "/v1/training", heartbeat(1), JSON)
    refused = conn.getresponse()
    body = json.loads(refused.read())
    assert refused.status == 503 and time.monotonic() - started < 1.0  # while the only worker is still held
    assert refused.getheader("Retry-After") == "2"
    assert "queue_limit 1" in body["error"] and body["field"] is None
    release.set()
    held.join(10)
    queued.join(10)
    assert results == {0: 202}
    conn.request("POST", "/v1/training", heartbeat(1), JSON)  # the refused connection is still usable
    again = conn.getresponse()
    again.read()
    assert again.status == 202
    conn.close()
    assert "POST /v1/training" in seen and dispatcher.refused == 1


def test_reads_are_served_ahead_of_queued_ingest(one_worker):
    server, release, seen = one_worker
    server.dispatcher.queue_limit = 100
    held = threading.Thread(target=get, args=(server.port, "/hold", 10))
    held.start()
    wait_for(lambda: seen == ["GET /hold"])
    results: dict[int, int] = {}
    posts = [post_later(server.port, rank, results) for rank in range(3)]
    wait_for(lambda: len(server.dispatcher.queue) == 3)
    health = threading.Thread(target=get, args=(server.port, "/healthz", 10))
    health.start()
    wait_for(lambda: len(server.dispatcher.queue) == 4)
    release.set()
    for thread in (held, health, *posts):
        thread.join(10)
    assert seen == ["GET /hold", "GET /healthz", *["POST /v1/training"] * 3]
    assert results == {0: 202, 1: 202, 2: 202}


def test_bad_input_still_gets_its_4xx_with_the_limits_on(served):
    status, _, body = served.request("POST", "/v1/training", b'{"ranks": [{"rank": -1}]}', JSON)
    assert status == 400 and json.loads(body)["field"].startswith("ranks[0]")


def test_an_idle_connection_is_closed_after_idle_timeout():
    engine = parts.engine()
    server = ApiServer(parts.app(engine), "127.0.0.1", 0, ServerLimits(idle_timeout=1))
    server.start()
    try:
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=6)
        started = time.monotonic()
        assert idle.recv(1) == b""  # the server closed it
        assert 0.9 < time.monotonic() - started < 6
        assert get(server.port, "/healthz", timeout=1.0) == 200
        idle.close()
    finally:
        server.close()
        engine.close()
