"""Shared fixtures: a live engine served by a real waitress server on loopback."""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests import parts
from trainpulse_otel.api import ApiServer
from trainpulse_otel.config import Settings
from trainpulse_otel.runtime.engine import Engine
from trainpulse_otel.runtime.plugins import AUTOLOAD_ENV

# Only TrainPulse's own plugins during tests: a third-party plugin installed on
# the machine must not change what the suite sees (tests that need one opt in).
os.environ.setdefault(AUTOLOAD_ENV, "1")

#: Where every test runs a real framework or a multi-process job: marked ``jobs`` (the quick tier leaves them out).
JOBS_DIR = os.path.join(os.path.dirname(__file__), "integrations")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if str(item.path).startswith(JOBS_DIR):
            item.add_marker(pytest.mark.jobs)


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    """A run that leaves ``jobs`` out does not even import their modules (PyTorch's import is seconds a worker)."""
    if "not jobs" in (config.option.markexpr or "") and str(collection_path).startswith(JOBS_DIR):
        return True
    return None


@dataclass
class Served:
    """An engine behind a real HTTP server, and a tiny client for it."""

    engine: Engine
    server: ApiServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()

    def send(
        self, method: str, path: str, body: bytes | Iterable[bytes] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """Exactly these headers (no client defaults); an iterable body goes chunked."""
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            chunked = body is not None and not isinstance(body, bytes)
            conn.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def get_json(self, path: str) -> tuple[int, Any]:
        status, _, body = self.request("GET", path)
        return status, json.loads(body)


@pytest.fixture
def serve_app() -> Iterator[Callable[..., Served]]:
    """Start servers for apps built over fresh engines: ``serve_app(lambda engine: parts.app(engine))``."""
    started: list[Served] = []

    def start(build: Callable[[Engine], Any] = parts.app) -> Served:
        engine = parts.engine(Settings(mode="none", addr="127.0.0.1:0"))
        server = ApiServer(build(engine), "127.0.0.1", 0)
        server.start()
        started.append(Served(engine, server))
        return started[-1]

    yield start
    for served in started:
        served.server.close()
        served.engine.close()


@pytest.fixture
def served(serve_app) -> Served:
    """An engine in mode none (ingest only), served on an ephemeral loopback port."""
    return serve_app()


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    """Torch tests run with one intra-op thread: on two shared cores the default pool makes a
    10 ms step take 10-400 ms. Modules that do not import torch are left alone."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
