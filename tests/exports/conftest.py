"""Fixtures for the export tests: real receivers, engines that export to them, a clean OTEL_* environment."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests import parts
from tests.exports.receivers import GrpcReceiver, HttpReceiver
from trainpulse_otel.api import ApiServer
from trainpulse_otel.config import Settings
from trainpulse_otel.runtime.engine import Engine


@pytest.fixture(autouse=True)
def clean_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_* variable of the machine running the tests leaks into them."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "TRAINPULSE_")):
            monkeypatch.delenv(name)


@pytest.fixture
def grpc_receiver() -> Iterator[GrpcReceiver]:
    receiver = GrpcReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(params=["grpc", "http/protobuf"])
def otlp_receiver(request: pytest.FixtureRequest) -> Iterator[GrpcReceiver | HttpReceiver]:
    """One receiver per OTLP protocol; ``.protocol`` says which. Ask for it before ``make_engine``
    so the engine (and its last export) closes first."""
    receiver = GrpcReceiver() if request.param == "grpc" else HttpReceiver()
    receiver.protocol = request.param  # type: ignore[union-attr]
    yield receiver
    receiver.close()


@pytest.fixture
def make_engine() -> Iterator[Callable[..., Engine]]:
    """Build engines with exports (OTLP included) from settings; all are closed afterwards."""
    engines: list[Engine] = []

    def make(mode: str = "none", **settings: Any) -> Engine:
        engine = parts.engine(Settings(mode=mode, addr="127.0.0.1:0", **settings), push=True)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


@dataclass
class ServedEngine:
    """An engine behind a real waitress server on loopback."""

    engine: Engine
    server: ApiServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def get(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of a GET."""
        return self.request("GET", path)

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[int, str, bytes]:
        req = urllib.request.Request(
            self.url + path,
            data=body,
            method=method,
            headers={"Content-Type": content_type} if body is not None else {},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                return response.status, response.headers["Content-Type"], response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.headers["Content-Type"], err.read()


@pytest.fixture
def serve() -> Iterator[Callable[..., ServedEngine]]:
    """Serve engines (sim by default, a few ticks done) over HTTP; all are closed afterwards."""
    served: list[ServedEngine] = []

    def start(mode: str = "sim", ticks: int = 3, **settings: Any) -> ServedEngine:
        engine = parts.engine(Settings(mode=mode, addr="127.0.0.1:0", **settings))
        for _ in range(ticks):
            engine.tick()
        server = ApiServer(parts.app(engine), "127.0.0.1", 0)
        server.start()
        served.append(ServedEngine(engine, server))
        return served[-1]

    yield start
    for one in served:
        one.server.close()
        one.engine.close()
