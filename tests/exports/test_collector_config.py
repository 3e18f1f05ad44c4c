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
