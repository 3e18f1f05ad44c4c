"""Following a real daemon over HTTP (waitress on loopback), and the one-frame CLI path."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests import parts
from trainpulse_otel.api import ApiServer
from trainpulse_otel.cli import main
from trainpulse_otel.config import Settings
from trainpulse_otel.dashboard.sources import RECONNECTED_SHOWN_S, RemoteSource, describe_error
from trainpulse_otel.runtime.engine import Engine
from trainpulse_otel.samples import parse_training

TRAINING = {
    "model_name": "llama-3-8b",
    "framework": "pytorch",
    "global_step": 120,
    "step_time_ms": 1750.0,
    "tokens_per_sec": 74900.0,
    "mfu": 0.45,
    "world_size": 2,
    "ranks": [{"rank": 0, "gpu_index": 0, "step_time_ms": 1700.0}, {"rank": 1, "gpu_index": 1, "step_time_ms": 1710.0}],
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = parts.engine(Settings(mode="none"))
    engine.ingest(parse_training(TRAINING))
    engine.tick()
    yield engine
    engine.close()


def serve(engine: Engine, port: int = 0) -> ApiServer:
    server = ApiServer(parts.app(engine), "127.0.0.1", port)
    server.start()
    return server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.e2e
def test_a_daemon_that_goes_away_is_disconnected_then_reconnected(engine, screen):
    server = serve(engine)
    port = server.port
    url = f"http://127.0.0.1:{port}"
    clock = Clock()
    source = RemoteSource(url, timeout_s=2.0, clock=clock)
    try:
        assert source.link.state == "connecting"
        first = source.poll()
        assert first is not None and first.training is not None and first.training.model_name == "llama-3-8b"
        assert source.link.state == "connected"

        server.close()
        clock.now += 5
        assert source.poll() is None
        assert (source.link.state, source.link.error, source.link.changed_at) == (
            "disconnected",
            "connection refused",
            clock.now,
        )
        clock.now += 7
        assert source.poll() is None and source.link.changed_at == clock.now - 7  # still the same outage
        text = "\n".join(screen(first, 80, 24, link=source.link, wall=clock.now))
        assert "DISCONNECTED" in text and f"no answer from {url} for 7s (connection refused)" in text

        server = serve(engine, port)  # the daemon comes back on the same port
        clock.now += 1
        assert source.poll() is not None
        assert source.link.state == "reconnected" and source.link.error is None
        text = "\n".join(screen(first, 80, 24, link=source.link, wall=clock.now + 2))
        assert "reconnected 2s ago" in text and "DISCONNECTED" not in text

        clock.now += RECONNECTED_SHOWN_S + 1
        source.poll()
        assert source.link.state == "connected"
    finally:
        server.close()


def test_a_url_without_a_scheme_means_http():
    assert RemoteSource("127.0.0.1:9876/").url == "http://127.0.0.1:9876"


@pytest.mark.e2e
def test_an_http_error_is_named(served):
    source = RemoteSource(served.url + "/no-such-prefix")
    assert source.poll() is None
    assert source.link.error.startswith("HTTP 404")


def test_a_response_that_is_not_json_is_named():
    assert describe_error(json.JSONDecodeError("Expecting value", "<html>", 0)) == "the response is not JSON"


@pytest.mark.e2e
def test_top_once_prints_one_frame_from_a_daemon(engine, capsys):
    server = serve(engine)
    try:
        assert main(["top", "-remote", f"http://127.0.0.1:{server.port}", "-once"]) == 0
    finally:
        server.close()
    out = capsys.readouterr().out
    assert "model llama-3-8b" in out and "mode none" in out
    assert "rank     0     1" in out  # the ranks strip, from the ingested per-rank data
    assert "GPUs none reported (mode none)" in out


def test_top_once_against_no_daemon_says_so_and_fails(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["top", "-remote", url, "-once"]) == 1
    assert capsys.readouterr().err.strip() == f"trainpulse: cannot read {url}/v1/snapshot: connection refused"


def test_top_once_in_sim_backfills_the_scenario(capsys):
    assert main(["top", "-mode", "sim", "-scenario", "rank_straggler", "-interval", "2s", "-once"]) == 0
    out = capsys.readouterr().out
    for index in range(8):
        assert f"\n{index}   " in out  # a row per simulated GPU
    assert "slowest r5 1.3" in out  # the straggler, from the per-rank data alone
    assert "tokens/s" in out and "MFU" in out


@pytest.mark.slow
def test_top_with_stdout_not_a_terminal_prints_one_frame_and_exits():
    done = subprocess.run(
        [sys.executable, "-m", "trainpulse_otel", "top", "-mode", "none"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "TrainPulse" in done.stdout and "Signals none active" in done.stdout
    assert "\x1b[" not in done.stdout  # no escape codes into a pipe
