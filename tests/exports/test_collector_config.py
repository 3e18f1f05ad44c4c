"""collector_config/: OTel Collector pipelines, Prometheus config and alert rules, Grafana dashboard."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.exports.metric_docs import documented

CONFIG = Path(__file__).resolve().parents[2] / "collector_config"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (CI installs Debian's prometheus package through .ci/run)"
)
METRIC = re.compile(r"\b(trainpulse_[a-z0-9_]+)")
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def load(name: str) -> dict:
    return yaml.safe_load((CONFIG / name).read_text(encoding="utf-8"))


def known_prometheus_names() -> set[str]:
    """Every name /metrics can show: documented families plus the series of documented histograms."""
    rows = documented().values()
    names = {row["prom"] for row in rows}
    names |= {row["prom"] + suffix for row in rows if row["type"] == "histogram" for suffix in HISTOGRAM_SERIES}
    return names


def pipelines_are_wired(config: dict) -> dict:
    """Every component a pipeline names is defined; returns the pipelines."""
    pipelines = config["service"]["pipelines"]
    for name, pipeline in pipelines.items():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                assert component in (config.get(section) or {}), f"{name}: {section} {component} is not defined"
    assert set(config["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    return pipelines


def test_otelcol_prometheus_keeps_the_contract_names():
    config = load("otelcol/prometheus.yaml")
    pipelines = pipelines_are_wired(config)
    assert pipelines["metrics"]["exporters"] == ["prometheus"] and "logs" in pipelines
    statements = config["processors"]["transform/dimensionless_units"]["metric_statements"][0]["statements"]
    assert statements == ['set(unit, "") where unit == "1"']  # else health_score becomes health_score_ratio
    assert "transform/dimensionless_units" in pipelines["metrics"]["processors"]


def test_otelcol_datadog_sends_deltas_and_events():
    config = load("otelcol/datadog.yaml")
    pipelines = pipelines_are_wired(config)
    assert "cumulativetodelta" in pipelines["metrics"]["processors"]
    assert pipelines["metrics"]["exporters"] == ["datadog"] and pipelines["logs"]["exporters"] == ["datadog"]
    datadog = config["exporters"]["datadog"]
    assert datadog["api"]["key"] == "${env:DD_API_KEY}"  # never a key in the file
    assert datadog["metrics"]["histograms"]["mode"] == "distributions"


def test_otelcol_debug_prints_metrics_and_events():
    pipelines = pipelines_are_wired(load("otelcol/debug.yaml"))
    assert pipelines["metrics"]["exporters"] == ["debug"] and pipelines["logs"]["exporters"] == ["debug"]


def test_alert_rules_watch_signals_and_health_with_known_names():
    rules = [rule for group in load("prometheus/alerts.yml")["groups"] for rule in group["rules"]]
    exprs = " ".join(rule["expr"] for rule in rules)
    assert "trainpulse_signal_active" in exprs and "trainpulse_health_score" in exprs
    assert set(METRIC.findall(exprs)) <= known_prometheus_names()
    assert all(rule.get("for") and rule["labels"]["severity"] in ("warning", "critical") for rule in rules)


def test_grafana_dashboard_uses_the_contract_names():
    dashboard = json.loads((CONFIG / "grafana/trainpulse-dashboard.json").read_text(encoding="utf-8"))
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used <= known_prometheus_names(), used - known_prometheus_names()
    assert {
        "trainpulse_health_score",
        "trainpulse_signal_active",
        "trainpulse_training_tokens_per_second",
        "trainpulse_training_mfu",
        "trainpulse_gpu_utilization_percent",
    } <= used
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in dashboard["panels"])
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource", "instance"]


@needs_promtool
@pytest.mark.parametrize(
    "command",
    [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts_test.yml"],  # the alerts fire when they should, and only then
        ["check", "config", "prometheus.yml"],
    ],
)
def test_promtool_accepts_the_prometheus_files(command):
    result = subprocess.run(
        [PROMTOOL, *command], cwd=CONFIG / "prometheus", capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


ENV_REFERENCE = re.compile(r"\$\{env:[A-Z_][A-Z0-9_]*(:-[^}]*)?\}")


def job_gateway() -> tuple[dict, dict]:
    config = load("otelcol/job-gateway.yaml")
    return config, pipelines_are_wired(config)


def test_job_gateway_sends_node_metrics_to_the_job_daemon_as_otlp_protobuf():
    config, pipelines = job_gateway()
    exporter = config["exporters"]["otlphttp/job_daemon"]
    assert exporter["metrics_endpoint"].startswith("http://") and exporter["metrics_endpoint"].endswith("/v1/metrics")
    assert ":9876" in exporter["metrics_endpoint"]  # the daemon's default port
    assert exporter["encoding"] == "proto" and exporter["compression"] == "gzip"
    assert "endpoint" not in exporter  # a base endpoint would post the gateway's events to /v1/logs as console lines
    carrying = [name for name, p in pipelines.items() if "otlphttp/job_daemon" in p["exporters"]]
    assert carrying and all(name.startswith("metrics") for name in carrying)


def test_job_gateway_never_feeds_the_job_daemon_its_own_verdict():
    config, pipelines = job_gateway()
    conditions = config["processors"]["filter/node_daemons_only"]["metrics"]["metric"]
    assert conditions == ['resource.attributes["service.name"] == "trainpulse-job"']
    for pipeline in pipelines.values():
        if "otlphttp/job_daemon" in pipeline["exporters"]:
            assert "filter/node_daemons_only" in pipeline["processors"]


def test_job_gateway_keeps_each_nodes_host_name():
    config, pipelines = job_gateway()
    used = {name for p in pipelines.values() for name in p.get("processors", [])}
    for name in used:
        settings = config["processors"][name] or {}
        if name.split("/")[0] == "resourcedetection":
            assert settings["override"] is False and "system" not in settings["detectors"], name
        for action in settings.get("attributes", []):
            if action["key"] == "host.name":
                assert action["action"] == "insert", (name, action)  # fills a missing one, never replaces
    assert not any(name.startswith("k8sattributes") for name in used)  # needs a cluster: opt-in, in comments
    assert config["exporters"]["prometheus"]["resource_to_telemetry_conversion"]["enabled"] is False


def test_job_gateway_exports_to_prometheus_and_datadog_with_events():
    _, pipelines = job_gateway()
    metrics = [p for name, p in pipelines.items() if name.split("/")[0] == "metrics"]
    by_exporter = {e: p for p in metrics for e in p["exporters"]}
    assert "transform/dimensionless_units" in by_exporter["prometheus"]["processors"]
    assert "cumulativetodelta" in by_exporter["datadog"]["processors"]
    assert "cumulativetodelta" not in by_exporter["otlphttp/job_daemon"]["processors"]  # it takes either temporality
    logs = [p for name, p in pipelines.items() if name.split("/")[0] == "logs"]
    assert logs and {"datadog", "debug"} <= {e for p in logs for e in p["exporters"]}
    assert all(p["processors"][0] == "memory_limiter" for p in pipelines.values())


def secrets_in(settings: object, key: str = "") -> list[tuple[str, object]]:
    """Every value under a credential-like key (an API key, a token, a header), found at any depth."""
    if isinstance(settings, dict):
        return [found for k, v in settings.items() for found in secrets_in(v, str(k))]
    if isinstance(settings, list):
        return [found for v in settings for found in secrets_in(v, key)]
    return [(key, settings)] if re.fullmatch(r"(?i)key|api_key|token|password|authorization|dd-api-key", key) else []


def test_job_gateway_holds_no_secret():
    config, _ = job_gateway()
    token = config["exporters"]["otlphttp/job_daemon"]["headers"]["Authorization"]
    assert token == "Bearer ${env:TRAINPULSE_AUTH_TOKEN}"
    assert config["exporters"]["datadog"]["api"]["key"] == "${env:DD_API_KEY}"
    found = secrets_in(config["exporters"])
    assert len(found) >= 2 and all(ENV_REFERENCE.search(str(value)) for _, value in found), found


def test_jobs_gateway_routes_each_job_to_its_own_daemon():
    config = load("otelcol/jobs-gateway.yaml")
    pipelines, routing = config["service"]["pipelines"], config["connectors"]["routing/jobs"]
    defined = {section: set(config.get(section) or {}) | set(config["connectors"]) for section in config}
    for name, pipeline in pipelines.items():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                assert component in defined[section], f"{name}: {section} {component} is not defined"
    routed = {}
    for route in routing["table"]:
        assert route["context"] == "resource"
        job = re.fullmatch(r'resource\.attributes\["trainpulse\.job"\] == "(\w+)"', route["condition"]).group(1)
        (pipeline,) = route["pipelines"]
        assert pipelines[pipeline]["receivers"] == ["routing/jobs"]
        (exporter,) = pipelines[pipeline]["exporters"]
        endpoint = config["exporters"][exporter]["metrics_endpoint"]
        assert endpoint.endswith("/v1/metrics") and job in endpoint and job in exporter
        routed[job] = exporter
    assert len(set(routed.values())) == len(routed) >= 2  # one daemon a job, none shared
    (unrouted,) = routing["default_pipelines"]
    assert pipelines[unrouted]["exporters"] == ["debug"]  # a node naming no known job reaches no daemon
    inbound = [p for p in pipelines.values() if "routing/jobs" in p["exporters"]]
    assert [p["processors"] for p in inbound] == [["memory_limiter", "filter/node_daemons_only"]]
    found = secrets_in(config["exporters"])  # each job's token from the environment, none in the file
    assert len(found) == len(routed) and all(ENV_REFERENCE.search(str(value)) for _, value in found), found
