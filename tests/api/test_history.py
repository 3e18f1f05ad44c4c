"""``GET /v1/history`` over real HTTP: the window's frames, oldest first, bounded by ``history_size``."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests import parts
from trainpulse_otel.api import ApiServer
from trainpulse_otel.config import Settings
from trainpulse_otel.publish.snapshot import history_from_dict, history_to_dict
from trainpulse_otel.runtime.engine import Engine
from trainpulse_otel.runtime.window import Window
from trainpulse_otel.samples import (
    Frame,
    GpuSample,
    HostSample,
    NodeSample,
    RankSample,
    TrainingSample,
    XidCount,
    parse_training,
)

RANKS = [{"rank": r, "gpu_index": r, "step_time_ms": 1000.0 + r} for r in range(4)]


def report(i: int) -> dict:
    return {
        "model_name": "llama-3-8b",
        "global_step": i,
        "step_time_ms": 1000.0,
        "tokens_per_sec": 1000.0 + i,
        "ranks": RANKS,
    }


def tick_with_reports(engine: Engine, count: int, start: float) -> list[float]:
    """``count`` ticks one second apart, each after a training report; their timestamps."""
    stamps = []
    for i in range(count):
        engine.ingest(parse_training(report(i)))
        stamps.append(start + i)
        engine.tick(stamps[-1])
    return stamps


@pytest.fixture
def ticked(served) -> tuple:
    """A served engine with six ticks behind it, and their timestamps."""
    return served, tick_with_reports(served.engine, 6, time.time() - 10)


def frames(served, query: str = "") -> list[dict]:
    status, body = served.get_json("/v1/history" + query)
    assert status == 200
    return body["frames"]


def test_history_is_the_windows_frames_oldest_first_without_diagnosis_or_ranks(ticked):
    served, stamps = ticked
    got = frames(served)
    assert [f["timestamp"] for f in got] == stamps
    assert all(set(f) == {"timestamp", "gpus", "host", "training"} for f in got)
    assert [f["training"]["tokens_per_sec"] for f in got] == [1000.0 + i for i in range(6)]
    assert all("ranks" not in f["training"] for f in got)
    snapshot = served.get_json("/v1/snapshot")[1]
    assert len(snapshot["training"]["ranks"]) == 4  # the snapshot keeps them
    newest = dict(snapshot["training"])
    del newest["ranks"]
    assert got[-1]["training"] == newest  # the newest frame is the snapshot's, in the snapshot's shape


def test_since_and_limit_select_newer_frames_and_the_newest_n(ticked):
    served, stamps = ticked
    assert [f["timestamp"] for f in frames(served, f"?since={stamps[3]!r}")] == stamps[4:]
    assert [f["timestamp"] for f in frames(served, "?limit=2")] == stamps[-2:]
    assert [f["timestamp"] for f in frames(served, f"?since={stamps[0]!r}&limit=3")] == stamps[-3:]
    assert frames(served, "?limit=0") == []
    assert frames(served, f"?since={stamps[-1]!r}") == []


def test_a_dashboard_reads_the_history_back(ticked):
    served, stamps = ticked
    read = history_from_dict(served.get_json("/v1/history")[1])
    assert [f.ts for f in read] == stamps
    assert [f.training.tokens_per_sec for f in read] == [1000.0 + i for i in range(6)]


@pytest.mark.parametrize(
    ("query", "field", "error"),
    [
        ("since=yesterday", "since", "since: must be a number, got 'yesterday'"),
        ("since=-5", "since", "since: must be >= 0, got -5.0"),
        ("since=nan", "since", "since: must be finite, got nan"),
        ("since=", "since", "since: must be a number, got ''"),
        ("limit=ten", "limit", "limit: must be an integer, got 'ten'"),
        ("limit=2.5", "limit", "limit: must be an integer, got '2.5'"),
        ("limit=-1", "limit", "limit: must be >= 0, got -1"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(served, query, field, error):
    status, headers, body = served.request("GET", "/v1/history?" + query)
    assert status == 400 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"error": error, "field": field}


def test_history_is_bounded_by_history_size():
    engine = parts.engine(Settings(mode="none", addr="127.0.0.1:0", history_size=5))
    server = ApiServer(parts.app(engine), "127.0.0.1", 0)
    server.start()
    try:
        stamps = tick_with_reports(engine, 8, time.time() - 10)
        for query in ("", "?limit=100"):
            assert [f["timestamp"] for f in json.loads(_get(server, "/v1/history" + query))["frames"]] == stamps[-5:]
    finally:
        server.close()
        engine.close()


def _get(server: ApiServer, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=10) as resp:
        return resp.read()


def test_before_the_first_tick_the_history_is_empty(served):
    assert frames(served) == []


def test_a_report_of_only_ranks_leaves_no_job_level_training_in_the_history(served):
    served.engine.ingest(parse_training({"ranks": RANKS}))
    served.engine.tick()
    assert frames(served)[-1]["training"] is None
    assert len(served.get_json("/v1/snapshot")[1]["training"]["ranks"]) == 4


def test_a_job_windows_older_frames_keep_what_the_history_shows_and_the_newest_stays_whole():
    own = GpuSample(index=0, utilization_percent=90.0)
    other = GpuSample(index=0, utilization_percent=80.0, node="node-001")
    training = TrainingSample(step_time_ms=1000.0, ranks=(RankSample(rank=0, step_time_ms=1000.0),))
    frames = [
        Frame(
            ts=float(t),
            gpus=(own, other),
            host=HostSample(cpu_percent=10.0),
            training=training,
            xid_counts=(XidCount(0, 79, 1, "node-001"),),
            nodes=(NodeSample("node-001", float(t)),),
        )
        for t in range(3)
    ]
    window = Window(10)
    for frame in frames:
        window.append(frame)
    older, newest = window.frames()[:-1], window.latest
    assert newest == frames[-1]  # the snapshot's frame: every node, rank and XID count
    assert all(f.gpus == (own,) and not f.training.ranks and not f.nodes and not f.xid_counts for f in older)
    assert history_to_dict(window.frames()) == history_to_dict(frames)  # what users see is unchanged
