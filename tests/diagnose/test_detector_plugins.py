"""Detectors resolve through the ``trainpulse.detectors`` entry points: built-ins and third-party plugins."""

from __future__ import annotations

import sys
from importlib.metadata import distribution

import pytest

from tests.diagnose.builders import job
from trainpulse_otel.runtime import plugins
from trainpulse_otel.diagnose.detectors import LowMfu, default_detectors
from trainpulse_otel.diagnose.types import DEFAULT_POLICY
from trainpulse_otel.diagnose.pipeline import DiagnosticPipeline
from trainpulse_otel.diagnose.types import SIGNALS
from trainpulse_otel.diagnose.window import Window


def test_installed_metadata_registers_exactly_the_builtin_table():
    installed = distribution(plugins.DISTRIBUTION).entry_points.select(group=plugins.DETECTORS_GROUP)
    assert {ep.name: ep.value for ep in installed} == dict(plugins.BUILTIN_ENTRY_POINTS[plugins.DETECTORS_GROUP])


def test_the_builtins_cover_every_contract_signal_under_their_own_names():
    detectors = default_detectors(autoload=False)
    assert {s for d in detectors for s in d.signals} == set(SIGNALS)
    assert [d.name for d in detectors] == list(plugins.load_detectors(autoload=False))


PLUGIN = '''
from trainpulse_otel.diagnose.detectors import BaseDetector
from trainpulse_otel.diagnose.types import Finding

class LossSpike(BaseDetector):
    name = "loss_spike"
    signals = ("loss_spike",)

    def update(self, tick):
        report = tick.report
        if report is None or report.loss is None:
            return None
        return [Finding("loss_spike", 2.0, message="loss spiked")] if report.loss > 10 else []

NOT_A_DETECTOR = 42
'''


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    (tmp_path / "acme_detectors.py").write_text(PLUGIN)
    info = tmp_path / "acme_detectors-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-detectors\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[trainpulse.detectors]\nloss_spike = acme_detectors:LossSpike\nbogus = acme_detectors:NOT_A_DETECTOR\n"
        "ranks = acme_detectors:LossSpike\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("acme_detectors", None)


def test_a_third_party_detector_joins_the_pipeline(third_party):
    names = [d.name for d in default_detectors(autoload=True)]
    assert names[-1] == "loss_spike" and "bogus" not in names
    assert names.count("ranks") == 1  # a plugin cannot replace a built-in
    pipeline, window = DiagnosticPipeline(default_detectors(autoload=True)), Window(10)
    for t in range(5):
        window.append(job(float(t), training={"loss": 50.0}))
        result = pipeline.update(window)
    assert [s.name for s in result.diagnosis.signals] == ["loss_spike"]
    assert _signal_active(result) == {("loss_spike", "warning"): 1, ("loss_spike", "critical"): 0}


def _signal_active(result) -> dict:  # noqa: ANN001
    """The plugin signal's ``trainpulse.signal.active`` series, as the OTel reader sees them."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from trainpulse_otel.publish.otel import DiagnosisPublisher

    reader = InMemoryMetricReader()
    publisher = DiagnosisPublisher(MeterProvider(metric_readers=[reader]).get_meter("t"), LoggerProvider().get_logger("t"))
    publisher.publish(result)
    [metric] = [m for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics if m.name == "trainpulse.signal.active"]
    return {(p.attributes["signal"], p.attributes["severity"]): p.value for p in metric.data.data_points
            if p.attributes["signal"] == "loss_spike"}


def test_autoload_off_loads_the_builtins_alone(third_party, monkeypatch):
    monkeypatch.setenv(plugins.AUTOLOAD_ENV, "1")
    assert "loss_spike" not in {d.name for d in default_detectors()}


class Broken:
    name, signals, every_s, policy = "broken", ("broken",), 0.0, DEFAULT_POLICY

    def update(self, tick):
        raise RuntimeError("a plugin bug")

    def facts(self):
        return {}


def test_a_failing_detector_is_logged_once_and_the_others_go_on(caplog):
    pipeline, window = DiagnosticPipeline([Broken(), LowMfu()]), Window(10)
    for t in range(6):
        window.append(job(float(t), training={"mfu": 0.05}))
        result = pipeline.update(window)
    assert [s.name for s in result.diagnosis.signals] == ["low_mfu"]
    assert pipeline.failures == {"broken": 6}
    assert [r.getMessage() for r in caplog.records] == ["detector broken failed; its signals hold until it judges again"]
