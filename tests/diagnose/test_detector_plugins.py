"""Detectors and root-cause rules resolve through entry points: built-ins and third-party plugins."""

from __future__ import annotations

import sys
from importlib.metadata import distribution

import pytest

from tests.diagnose.builders import T0, job
from trainpulse_otel.diagnose import DEFAULT_POLICY, ROOT_CAUSES, SIGNALS, DiagnosticPipeline
from trainpulse_otel.diagnose.detectors import LowMfu
from trainpulse_otel.runtime import build_pipeline, plugins


def detectors(autoload: bool | None = None) -> list:
    return plugins.discover(autoload).new_detectors()


def test_the_builtins_are_registered_once_as_our_own_entry_points():
    installed = distribution(plugins.DISTRIBUTION).entry_points
    for group in plugins.GROUPS:
        assert {ep.name for ep in installed.select(group=group)} == set(
            plugins.load_group(group, lambda n, o: o, autoload=False)
        )
    assert not hasattr(plugins, "BUILTIN_ENTRY_POINTS")  # no second list beside pyproject.toml


def test_the_builtins_cover_every_contract_signal_and_cause_under_their_own_names():
    found = plugins.discover(autoload=False)
    assert {s for d in found.new_detectors() for s in d.signals} == set(SIGNALS)
    assert [d.name for d in found.new_detectors()] == list(found.detectors)
    assert set(found.root_causes) == set(ROOT_CAUSES)
    assert all(rule.name == name for name, rule in found.root_causes.items())
    assert [n for n, r in found.root_causes.items() if r.residual] == ["compute_inefficiency"]


PLUGIN = """
from trainpulse_otel.diagnose import BaseDetector, Candidate, Finding, Rule

class LossPlateau(BaseDetector):
    name = "loss_plateau"
    signals = ("loss_plateau",)

    def update(self, tick):
        report = tick.report
        if report is None or report.loss is None:
            return None
        return [Finding("loss_plateau", 2.0, message="loss stuck high")] if report.loss > 10 else []

NOT_A_DETECTOR = 42


def propose(evidence):
    plateau = evidence.job_signal("loss_plateau")
    if plateau is None:
        return []
    return [Candidate("bad_data_shard", 0.8, "loss stuck on one data shard", "skip the shard", [plateau])]

RULE = Rule("bad_data_shard", propose)
"""


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    (tmp_path / "acme_detectors.py").write_text(PLUGIN)
    info = tmp_path / "acme_detectors-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-detectors\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[trainpulse.detectors]\nloss_plateau = acme_detectors:LossPlateau\nbogus = acme_detectors:NOT_A_DETECTOR\n"
        "ranks = acme_detectors:LossPlateau\n"
        "[trainpulse.root_causes]\nbad_data_shard = acme_detectors:RULE\nbroken = acme_detectors:NOT_A_DETECTOR\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("acme_detectors", None)


def test_a_third_party_detector_and_rule_join_the_pipeline(third_party):
    names = [d.name for d in detectors(autoload=True)]
    assert names[-1] == "loss_plateau" and "bogus" not in names
    assert names.count("ranks") == 1  # a plugin cannot replace a built-in
    found = plugins.discover(autoload=True)
    assert "bad_data_shard" in found.root_causes and "broken" not in found.root_causes
    pipeline = build_pipeline(found)
    for t in range(5):
        result = pipeline.update(job(float(t), training={"loss": 50.0}))
    assert [s.name for s in result.diagnosis.signals] == ["loss_plateau"]
    [cause] = result.diagnosis.root_causes  # the plugin's signal became the plugin's cause
    assert cause.cause == "bad_data_shard" and cause.signals == ("loss_plateau",)
    assert _signal_active(result) == {("loss_plateau", "warning"): 1, ("loss_plateau", "critical"): 0}


def _signal_active(result) -> dict:
    """The plugin signal's ``trainpulse.signal.active`` series, as the OTel reader sees them."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from trainpulse_otel.publish.otel import DiagnosisPublisher

    reader = InMemoryMetricReader()
    publisher = DiagnosisPublisher(
        MeterProvider(metric_readers=[reader]).get_meter("t"), LoggerProvider().get_logger("t")
    )
    publisher.publish(result)
    [metric] = [
        m
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "trainpulse.signal.active"
    ]
    return {
        (p.attributes["signal"], p.attributes["severity"]): p.value
        for p in metric.data.data_points
        if p.attributes["signal"] == "loss_plateau"
    }


def test_autoload_off_loads_the_builtins_alone(third_party, monkeypatch):
    monkeypatch.setenv(plugins.AUTOLOAD_ENV, "1")
    assert "loss_plateau" not in {d.name for d in detectors()}
    assert "bad_data_shard" not in plugins.discover().root_causes


class Broken:
    name, signals, every_s, policy = "broken", ("broken",), 0.0, DEFAULT_POLICY

    def update(self, tick):
        raise RuntimeError("a plugin bug")

    def facts(self):
        return {}


def test_a_failing_detector_is_logged_once_and_the_others_go_on(caplog):
    pipeline = DiagnosticPipeline([Broken(), LowMfu()], [])
    for t in range(6):
        result = pipeline.update(job(float(t), training={"mfu": 0.05}))
    assert [s.name for s in result.diagnosis.signals] == ["low_mfu"]
    assert pipeline.failures == {"broken": 6}
    assert [r.getMessage() for r in caplog.records] == [
        "detector broken failed; its signals hold until it judges again"
    ]


class Periodic:
    """A detector judging every 2 s that notes the ticks it was called on."""

    signals, policy, every_s = (), DEFAULT_POLICY, 2.0

    def __init__(self, name: str) -> None:
        self.name, self.calls = name, []

    def update(self, tick):
        self.calls.append(tick.ts - T0)

    def facts(self):
        return {}


def test_detectors_of_one_period_take_turns_instead_of_sharing_a_tick():
    first, second, third = Periodic("a"), Periodic("b"), Periodic("c")
    pipeline = DiagnosticPipeline([first, second, LowMfu(), third], [])
    for t in range(8):
        pipeline.update(job(float(t)))
    assert first.calls == third.calls == [0.0, 2.0, 4.0, 6.0]
    assert second.calls == [1.0, 3.0, 5.0, 7.0]  # half a period later: the 2-second work spread over two ticks
