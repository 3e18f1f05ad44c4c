"""The API over real HTTP (waitress): health, snapshot, JSON errors."""

import dataclasses
import json
import threading

from tests.exports.receivers import wait_until
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.runtime import engine as engine_module
from trainpulse_otel.samples import parse_training


def test_healthz(served):
    status, body = served.get_json("/healthz")
    assert status == 200 and body["status"] == "ok" and body["mode"] == "none"
    assert body["ticks"] == 0 and body["last_tick_age_s"] is None and body["last_tick_duration_ms"] is None
    served.engine.tick()
    status, body = served.get_json("/healthz")
    assert body["ticks"] == 1 and 0 < body["last_tick_duration_ms"] < 10_000


class HangingCollector:
    """A collector whose driver call hangs until released, as a wedged NVML call would."""

    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()

    def collect(self, now: float) -> Collected:
        self.release.wait(10)
        return Collected()

    def close(self) -> None:
        self.release.set()


def test_healthz_is_503_while_the_run_loop_is_stuck_and_recovers(served, monkeypatch):
    monkeypatch.setattr(engine_module, "STALL_MIN_S", 0.2)
    served.engine.settings = dataclasses.replace(served.engine.settings, interval=0.02)
    hanging = HangingCollector()
    served.engine.collectors = (hanging,)
    stop = threading.Event()
    loop = threading.Thread(target=served.engine.run, args=(stop,), daemon=True)
    loop.start()
    try:
        assert wait_until(lambda: served.get_json("/healthz")[0] == 503, timeout=5.0, step=0.02)
        status, body = served.get_json("/healthz")
        assert status == 503 and body["status"] == "stalled" and body["last_tick_age_s"] > 0.2
        hanging.release.set()
        assert wait_until(lambda: served.get_json("/healthz")[1]["ticks"] >= 1, timeout=5.0, step=0.02)
        status, body = served.get_json("/healthz")
        assert status == 200 and body["status"] == "ok"
    finally:
        hanging.release.set()
        stop.set()
        loop.join(5)


def test_snapshot_shows_ingested_training_after_a_tick(served):
    served.engine.ingest(
        parse_training(
            {"step_time_ms": 1200, "model_name": "m", "ranks": [{"rank": 0, "gpu_index": 0, "step_time_ms": 1100}]}
        )
    )
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


def _post(served, body, content_type="application/json"):
    status, _, raw = served.request("POST", "/v1/training", body, {"Content-Type": content_type})
    return status, json.loads(raw)


def test_ingest_accepts_a_valid_payload(served):
    status, body = _post(served, json.dumps({"step_time_ms": 950.0, "tokens_per_sec": 1e5}).encode())
    assert status == 202 and body["status"] == "accepted"
    assert served.engine.latest.current().training.step_time_ms == 950.0


def test_ingest_errors_name_the_field(served):
    cases = [
        (b"{not json", 400, None),
        (b'{"step_time_ms": NaN}', 400, "step_time_ms"),
        (b"[1, 2]", 400, None),
        (json.dumps({"step_time_ms": "slow"}).encode(), 400, "step_time_ms"),
        (json.dumps({"mfu": 2}).encode(), 400, "mfu"),
        (json.dumps({"ranks": [{"rank": 0, "step_time_ms": -1}]}).encode(), 400, "ranks[0].step_time_ms"),
    ]
    for body, code, field in cases:
        status, answer = _post(served, body)
        assert (status, answer["field"]) == (code, field), body
        assert answer["error"]
    assert served.engine.latest.current().training is None  # nothing bad got in


def test_ingest_rejects_other_content_types_and_huge_bodies(served):
    status, answer = _post(served, b"step_time_ms=3", "application/x-www-form-urlencoded")
    assert status == 415 and "content type" in answer["error"]
    status, answer = _post(served, b'{"step_time_ms": 1, "pad": "' + b"x" * (2 << 20) + b'"}')
    assert status == 413 and "larger than" in answer["error"]
