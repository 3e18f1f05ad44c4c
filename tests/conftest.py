"""Shared fixtures: a live engine served by a real waitress server on loopback."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from trainpulse_otel.api import ApiServer, create_app
from trainpulse_otel.config import Settings
from trainpulse_otel.engine import Engine


@dataclass
class Served:
    """An engine behind a real HTTP server, and a tiny client for it."""

    engine: Engine
    server: ApiServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()

    def get_json(self, path: str) -> tuple[int, Any]:
        status, _, body = self.request("GET", path)
        return status, json.loads(body)


@pytest.fixture
def served() -> Iterator[Served]:
    """An engine in mode none (ingest only), served on an ephemeral loopback port."""
    engine = Engine(Settings(mode="none", addr="127.0.0.1:0"), [], "none")
    server = ApiServer(create_app(engine), "127.0.0.1", 0)
    server.start()
    try:
        yield Served(engine, server)
    finally:
        server.close()
        engine.close()


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
