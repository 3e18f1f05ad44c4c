"""Remote ``top`` over a real daemon (waitress on loopback): sparklines full from the first frame, the
frames an outage missed filled in on reconnect, and a body it cannot read shown as a reason."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from tests import parts
from trainpulse_otel.api import ApiServer
from trainpulse_otel.config import Settings
from trainpulse_otel.dashboard.app import run_top
from trainpulse_otel.dashboard.sources import RemoteSource
from trainpulse_otel.dashboard.view import History
from trainpulse_otel.runtime.engine import Engine
from trainpulse_otel.samples import parse_training

TOKEN = "tp-9f2c41d07be64a0aa3"
SNAPSHOTS = Path(__file__).parent.parent / "fixtures" / "snapshots"
SPARK = re.compile("[▁▂▃▄▅▆▇█]")


def tick(engine: Engine, ts: float) -> None:
    """One tick at ``ts`` after a report whose throughput wanders with time, so every sparkline cell shows."""
    engine.ingest(
        parse_training(
            {
                "model_name": "llama-3-8b",
                "step_time_ms": 1000.0,
                "mfu": 0.4,
                "tokens_per_sec": 70000.0 + 500.0 * (ts % 7),
            }
        )
    )
    engine.tick(ts)


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = parts.engine(Settings(mode="none", addr="127.0.0.1:0"))
    yield engine
    engine.close()


def serve(app: Flask, port: int = 0) -> ApiServer:
    server = ApiServer(app, "127.0.0.1", port)
    server.start()
    return server


@pytest.mark.e2e
def test_remote_tops_first_frame_already_has_full_sparklines(engine, console_at):
    start = time.time() - 60
    for i in range(40):
        tick(engine, start + i)
    server = serve(parts.app(engine, auth_token=TOKEN, auth_scope="all"))  # history needs the token too
    try:
        url = f"http://127.0.0.1:{server.port}"
        history = History()
        source = RemoteSource(url, token=TOKEN)
        source.start(history, live=False)
        assert source.poll() is not None and source.link.state == "connected"
        assert [f.ts for f in history] == [start + i for i in range(40)]  # the daemon's window, before a 2nd poll

        console = console_at(120, 48)
        assert run_top(RemoteSource(url, token=TOKEN), 1.0, once=True, console=console) == 0
    finally:
        server.close()
    tokens = next(line for line in console.export_text(styles=False).splitlines() if "tokens/s" in line)
    assert len(SPARK.findall(tokens)) >= 40, tokens


@pytest.mark.e2e
def test_a_reconnect_fills_in_the_frames_the_outage_missed(engine):
    start = time.time() - 60
    for i in range(5):
        tick(engine, start + i)
    server = serve(parts.app(engine))
    port = server.port
    history = History()
    source = RemoteSource(f"http://127.0.0.1:{port}")
    source.start(history, live=False)
    try:
        history.add(source.poll())
        server.close()
        for i in range(5, 12):  # the daemon keeps ticking while top cannot reach it
            tick(engine, start + i)
        assert source.poll() is None and source.link.state == "disconnected"
        server = serve(parts.app(engine), port)
        history.add(source.poll())
        assert source.link.state == "reconnected"
        assert [f.ts for f in history] == [start + i for i in range(12)]
    finally:
        server.close()


def other_version() -> Flask:
    """A daemon of another version: one whose snapshot this dashboard cannot read, one without ``/v1/history``."""
    good = json.loads((SNAPSHOTS / "straggler_8gpu.json").read_text())
    broken = json.loads((SNAPSHOTS / "straggler_8gpu.json").read_text())
    broken["gpus"][0]["utilization_percent"] = "high"
    app = Flask("other-version")
    app.add_url_rule("/old/v1/snapshot", "good", lambda: good)
    app.add_url_rule("/broken/v1/snapshot", "broken", lambda: broken)
    return app


@pytest.mark.e2e
def test_a_snapshot_it_cannot_read_marks_the_link_disconnected_with_the_reason(screen):
    server = serve(other_version())
    try:
        url = f"http://127.0.0.1:{server.port}"
        source = RemoteSource(url + "/broken")
        source.start(History(), live=False)
        assert source.poll() is None
        assert source.link.state == "disconnected"
        assert source.link.error == "unreadable: gpus[0].utilization_percent: must be a number, got string"
        text = "\n".join(screen(None, 160, 24, link=source.link, wall=source.link.changed_at + 3))
        assert "DISCONNECTED" in text and "gpus[0].utilization_percent: must be a number" in text

        old = RemoteSource(url + "/old")
        history = History()
        old.start(history, live=False)
        snapshot = old.poll()  # no /v1/history there (404): the snapshot still reads
        assert snapshot is not None and old.link.state == "connected" and len(history) == 0
    finally:
        server.close()
