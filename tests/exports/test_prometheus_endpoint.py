"""GET /metrics over real HTTP: the contract's names, labels, namespace, promtool, concurrency, ingest counters."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading

import pytest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from tests.exports.scenario import exercise_every_instrument
from trainpulse_otel.diagnose.types import SIGNALS
from trainpulse_otel.telemetry.catalog import MEASUREMENTS

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (CI installs Debian's prometheus package through .ci/run)"
)


def samples(body: bytes) -> dict[str, list]:
    """Samples by name, parsed by prometheus_client's own text parser."""
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_metrics_has_the_contract_names_and_labels(serve):
    served = serve()
    status, content_type, body = served.get("/metrics")
    assert status == 200 and content_type == CONTENT_TYPE_LATEST
    got = samples(body)
    health = served.engine.publisher.diagnosis.health
    assert [(s.labels, s.value) for s in got["trainpulse_health_score"]] == [({"status": health.status}, health.score)]
    assert got["trainpulse_training_tokens_per_second"][0].value > 0
    assert 0 < got["trainpulse_training_mfu"][0].value < 1
    gpus = {s.labels["gpu_index"]: s.value for s in got["trainpulse_gpu_utilization_percent"]}
    assert sorted(gpus, key=int) == [str(i) for i in range(8)] and all(0 <= v <= 100 for v in gpus.values())
    active = got["trainpulse_signal_active"]
    assert all(set(s.labels) == {"signal", "severity"} for s in active)
    assert {s.labels["severity"] for s in active} == {"warning", "critical"} and len(active) == len(SIGNALS) * 2
    assert {s.labels["rank"] for s in got["trainpulse_rank_step_time_milliseconds"]} == {str(r) for r in range(8)}
    assert got["trainpulse_training_step_time_milliseconds"][0].value > 0
    target = got["target_info"][0].labels
    assert target["service_name"] == "trainpulse" and target["host_name"]
    assert not any(label.startswith("otel_scope") for series in got.values() for s in series for label in s.labels)


def test_metrics_namespace_renames_every_metric(serve):
    _, _, body = serve(metrics_namespace="acme").get("/metrics")
    names = set(samples(body))
    assert {"acme_health_score", "acme_gpu_utilization_percent", "acme_signal_active"} <= names
    assert not [n for n in names if n.startswith("trainpulse_")]


def test_metrics_can_be_turned_off(serve):
    served = serve(prometheus={"enabled": False})
    status, _, body = served.get("/metrics")
    assert status == 404 and "prometheus.enabled" in json.loads(body)["error"]
    assert served.get("/v1/metrics")[0] == 200  # the JSON endpoint stays


def test_concurrent_scrapes_each_get_everything(serve):
    served = serve()
    bodies: list[bytes] = []

    def scrape() -> None:
        bodies.extend(served.get("/metrics")[2] for _ in range(5))

    threads = [threading.Thread(target=scrape) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(bodies) == 20
    for body in bodies:
        got = samples(body)
        assert len(got["trainpulse_gpu_utilization_percent"]) == 8 and len(got["trainpulse_health_score"]) == 1


def test_ingest_outcomes_are_counted(serve):
    served = serve(mode="none", ticks=0)
    good = json.dumps({"step_time_ms": 900.0, "framework": "deepspeed", "model_name": "m"}).encode()
    assert served.request("POST", "/v1/training", good)[0] == 202
    assert served.request("POST", "/v1/training", good)[0] == 202
    assert served.request("POST", "/v1/training", b'{"mfu": 7}')[0] == 400
    assert served.request("POST", "/v1/training", b"{oops")[0] == 400
    assert served.request("POST", "/v1/training", b"step_time_ms=1", "text/plain")[0] == 415
    got = samples(served.get("/metrics")[2])
    assert [(s.labels, s.value) for s in got["trainpulse_ingest_samples_total"]] == [
        ({"framework": "deepspeed", "source": "rest"}, 2.0)
    ]
    errors = {s.labels["reason"]: s.value for s in got["trainpulse_ingest_errors_total"]}
    assert errors == {"invalid_field": 1.0, "malformed": 1.0, "unsupported_media_type": 1.0}
    buckets = {s.labels["le"]: s.value for s in got["trainpulse_training_step_duration_seconds_bucket"]}
    assert buckets["0.5"] == 0 and buckets["1.0"] == 2 and buckets["+Inf"] == 2
    assert "trainpulse_tick_duration_seconds_count" not in got  # no tick yet
    served.engine.tick()
    assert [s.value for s in samples(served.get("/metrics")[2])["trainpulse_tick_duration_seconds_count"]] == [1.0]


def contract_millisecond_names(namespace: str = "trainpulse") -> set[str]:
    """The contract keeps milliseconds in these names (``…_step_time_milliseconds``)."""
    return {f"{namespace}_{spec.suffix.replace('.', '_')}_milliseconds" for spec in MEASUREMENTS if spec.unit == "ms"}


@needs_promtool
def test_promtool_check_metrics_finds_nothing_but_the_contracts_milliseconds(serve):
    served = serve()
    exercise_every_instrument(served.engine)
    _, _, body = served.get("/metrics")
    result = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60)
    problems = (result.stdout + result.stderr).decode().strip().splitlines()
    assert result.returncode in (0, 3), problems  # 3: lint findings only; 1 would be a parse error
    allowed = contract_millisecond_names()
    unexpected = [
        p
        for p in problems
        if not (p.split(" ", 1)[0] in allowed and p.endswith('use base unit "seconds" instead of "milliseconds"'))
    ]
    assert unexpected == []
    assert len(problems) == len(allowed)  # every millisecond name is exposed, and those are the only findings
