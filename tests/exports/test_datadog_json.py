"""GET /v1/metrics over real HTTP: the contract's Datadog-friendly shape with useful tags."""

from __future__ import annotations

import json
import socket

from tests.exports.scenario import exercise_every_instrument
from trainpulse_otel import __version__


def fetch(served) -> list[dict]:
    status, content_type, body = served.get("/v1/metrics")
    assert status == 200 and content_type.startswith("application/json")
    return json.loads(body)


def entries(points: list[dict], metric: str) -> list[dict]:
    return [p for p in points if p["metric"] == metric]


def test_every_entry_has_the_contract_shape(serve):
    served = serve()
    exercise_every_instrument(served.engine)
    points = fetch(served)
    assert len(points) > 200
    for point in points:
        assert set(point) == {"metric", "value", "type", "tags"}
        assert isinstance(point["metric"], str) and point["metric"].startswith("trainpulse.")
        assert isinstance(point["value"], (int, float)) and not isinstance(point["value"], bool)
        assert point["type"] in ("gauge", "count", "rate")
        assert all(isinstance(t, str) and ":" in t and not t.startswith(":") for t in point["tags"])


def test_tags_name_the_service_host_gpu_rank_signal_and_job(serve, monkeypatch):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod")
    served = serve()
    exercise_every_instrument(served.engine)
    points = fetch(served)
    [health] = entries(points, "trainpulse.health.score")
    assert health["type"] == "gauge" and health["value"] == 62.0
    assert {
        "service:trainpulse",
        f"host:{socket.gethostname()}",
        f"version:{__version__}",
        "env:prod",
        "status:degraded",
    } <= set(health["tags"])
    gpus = entries(points, "trainpulse.gpu.utilization")
    own = [p for p in gpus if not any(t.startswith("hostname:") for t in p["tags"])]
    assert sorted(t for p in own for t in p["tags"] if t.startswith("gpu:")) == sorted(f"gpu:{i}" for i in range(8))
    assert not [p for p in gpus if "hostname:node-021" in p["tags"]]  # another node's GPUs: its daemon's series
    [seen] = entries(points, "trainpulse.node.last_seen")  # its summary is the job daemon's: its host named
    assert "hostname:node-021" in seen["tags"]
    straggler = [
        p
        for p in entries(points, "trainpulse.signal.active")
        if {"signal:rank_straggler", "severity:warning"} <= set(p["tags"])
    ]
    assert [p["value"] for p in straggler] == [1]
    [rank5] = [p for p in entries(points, "trainpulse.rank.step_time") if "rank:5" in p["tags"]]
    assert rank5["value"] == 1305.0 and "gpu:5" in rank5["tags"] and "hostname:node-1" in rank5["tags"]
    [mfu] = entries(points, "trainpulse.training.mfu")
    assert {"model:llama-3-8b", "framework:megatron"} <= set(mfu["tags"])


def test_counters_and_histograms_are_rates_of_cumulative_totals(serve):
    served = serve(mode="none", ticks=0)
    exercise_every_instrument(served.engine)
    exercise_every_instrument(served.engine)
    points = fetch(served)
    [samples] = entries(points, "trainpulse.ingest.samples")
    assert samples["type"] == "rate" and samples["value"] == 2
    assert {"source:framework", "framework:megatron"} <= set(samples["tags"])
    [count] = entries(points, "trainpulse.training.step_duration.count")
    [total] = entries(points, "trainpulse.training.step_duration.sum")
    assert (count["type"], count["value"]) == ("rate", 2) and (total["type"], total["value"]) == ("rate", 2.9)
    assert entries(fetch(served), "trainpulse.ingest.samples")[0]["value"] == 2  # reading is side-effect free
