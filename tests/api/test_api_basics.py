"""The API over real HTTP (waitress): health, snapshot, JSON errors."""

import json

from trainpulse_otel.samples import parse_training


def test_healthz(served):
    status, body = served.get_json("/healthz")
    assert status == 200 and body["status"] == "ok" and body["mode"] == "none"


def test_snapshot_shows_ingested_training_after_a_tick(served):
    served.engine.ingest(parse_training({"step_time_ms": 1200, "model_name": "m",
                                         "ranks": [{"rank": 0, "gpu_index": 0, "step_time_ms": 1100}]}))
    served.engine.tick()
    status, snap = served.get_json("/v1/snapshot")
    assert status == 200
    assert {"timestamp", "mode", "gpus", "host", "training", "diagnosis"} <= set(snap)
    assert snap["training"]["step_time_ms"] == 1200 and snap["training"]["ranks"][0]["gpu_index"] == 0
    assert snap["diagnosis"]["health"]["status"] == "healthy"


def test_unknown_path_is_json_404(served):
    status, headers, body = served.request("GET", "/nope")
    assert status == 404 and headers["Content-Type"].startswith("application/json")
    assert "error" in json.loads(body)


def test_wrong_method_is_json_405(served):
    status, _, body = served.request("DELETE", "/healthz")
    assert status == 405 and "error" in json.loads(body)
