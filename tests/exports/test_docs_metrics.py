"""docs/metrics.md stays true: every live metric is documented with its names, unit, type and labels."""

from __future__ import annotations

from opentelemetry.exporter.prometheus._mapping import map_unit, sanitize_attribute, sanitize_full_name
from opentelemetry.sdk.metrics.export import Histogram, Sum
from prometheus_client.parser import text_string_to_metric_families

from tests.exports.metric_docs import DOC, doc_labels, documented
from tests.exports.scenario import exercise_every_instrument
from trainpulse_otel.publish.otel import EVENT_CLEARED, EVENT_RAISED, EVENT_ROOT_CAUSE


def kind_of(metric) -> str:  # metric: an SDK Metric
    if isinstance(metric.data, Histogram):
        return "histogram"
    return "counter" if isinstance(metric.data, Sum) and metric.data.is_monotonic else "gauge"


def prometheus_name(metric) -> str:
    """The name the OTel Prometheus exporter gives ``metric`` (its own mapping functions)."""
    name, unit = sanitize_full_name(metric.name), map_unit(metric.unit or "")
    if unit and not name.endswith("_" + unit):
        name += "_" + unit
    return name + "_total" if kind_of(metric) == "counter" else name


def test_every_live_metric_is_documented_with_unit_type_and_labels(serve):
    served = serve()
    exercise_every_instrument(served.engine)
    rows = documented()
    collected = [
        m
        for rm in served.engine.exports.datadog.reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    ]
    assert len(collected) == len(rows) > 60
    for metric in collected:
        row = rows.get(metric.name)
        assert row is not None, f"{metric.name} is not in docs/metrics.md"
        assert row["prom"] == prometheus_name(metric), metric.name
        assert row["unit"] == (f"`{metric.unit}`" if metric.unit else "(none)"), metric.name
        assert row["type"].split(" ")[0] == kind_of(metric), metric.name
        seen = {sanitize_attribute(key) for point in metric.data.data_points for key in point.attributes}
        assert seen <= doc_labels(row["labels"]), (metric.name, seen - doc_labels(row["labels"]))


def test_documented_prometheus_names_are_exactly_those_served(serve):
    served = serve()
    exercise_every_instrument(served.engine)
    families = text_string_to_metric_families(served.get("/metrics")[2].decode())
    served_names = {f.name + "_total" if f.type == "counter" else f.name for f in families} - {"target_info"}
    assert {row["prom"] for row in documented().values()} == served_names


def test_events_are_documented():
    text = DOC.read_text(encoding="utf-8")
    for event in (EVENT_RAISED, EVENT_CLEARED, EVENT_ROOT_CAUSE):
        assert f"`{event}`" in text
