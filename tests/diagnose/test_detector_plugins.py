"""Detectors and root-cause rules: the built-ins listed in code, third parties through entry points, checked
against one vocabulary; a plugin's signal and cause are as first class as a built-in's."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.diagnose.builders import T0, job
from trainpulse_otel.config import ConfigError
from trainpulse_otel.diagnose import (
    DEFAULT_POLICY,
    VOCABULARY,
    Candidate,
    DiagnosticPipeline,
    FactSpec,
    Signal,
    SignalSpec,
    SpecError,
    Vocabulary,
)
from trainpulse_otel.diagnose.builtins import DETECTORS, RULES
from trainpulse_otel.diagnose.detectors import LowMfu, ThroughputCollapse
from trainpulse_otel.diagnose.rootcause import rank_candidates
from trainpulse_otel.runtime import build_pipeline, plugins

ROOT = Path(__file__).resolve().parents[2]
#: The contract's names (../shared/CONTRACT.md "Signals" and "Root causes") that the built-ins raise today.
CONTRACT_SIGNALS = {
    "dataloader_starvation", "gpu_underutilization", "sync_imbalance", "memory_pressure", "thermal_instability",
    "throughput_collapse", "low_mfu", "sequence_padding", "tokenizer_stall", "allreduce_wait", "checkpoint_stall",
    "pipeline_bubble", "rank_straggler", "training_stalled", "loss_spike", "nonfinite_loss", "gpu_hardware_fault",
    "node_unreachable", "gpu_memory_degradation", "oom_risk", "thermal_throttle_risk", "collective_timeout",
    "network_error", "out_of_memory", "rank_crashed", "link_degradation",
}  # fmt: skip
CONTRACT_CAUSES = {
    "input_pipeline_bound", "tokenizer_bound", "straggler_rank", "gpu_thermal_throttling", "gpu_power_throttling",
    "communication_bound", "checkpoint_io_bound", "pipeline_bubbles", "padding_waste", "host_memory_pressure",
    "gpu_memory_pressure", "compute_inefficiency", "load_imbalance", "rank_hang", "numerical_instability",
    "gpu_hardware_failure", "node_failure", "network_failure", "rank_failure", "interconnect_degradation",
}  # fmt: skip


def test_the_builtins_are_listed_in_code_and_pyproject_declares_no_plugin_of_ours():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert not [group for group in plugins.GROUPS if f'[project.entry-points."{group}"]' in pyproject]
    found = plugins.discover(autoload=False)
    assert list(found.detectors.values()) == list(DETECTORS)
    assert list(found.root_causes.values()) == list(RULES)
    assert set(found.collectors) == {"nvml", "nvidia-smi", "host", "infiniband", "sim"}
    assert set(found.adapters) == {
        "generic",
        "pytorch",
        "deepspeed",
        "megatron",
        "huggingface",
        "lightning",
        "torchtitan",
    }


def test_the_builtins_declare_every_contract_signal_and_cause_once():
    assert set(VOCABULARY.signal_names) == CONTRACT_SIGNALS
    assert set(VOCABULARY.cause_names) == CONTRACT_CAUSES
    assert [r.name for r in RULES if r.residual] == ["compute_inefficiency"]
    # the deepest layer first on equal confidence: a silent node, then a failing GPU, ... what is left last
    tie = sorted(VOCABULARY.tie_rank, key=VOCABULARY.tie_rank.get)
    assert tie[:2] == ["node_failure", "gpu_hardware_failure"] and tie[-2:] == [
        "compute_inefficiency",
        "numerical_instability",
    ]
    assert VOCABULARY.predictive == {"oom_risk", "thermal_throttle_risk", "gpu_memory_degradation", "link_degradation"}


PLUGIN = """
from trainpulse_otel.diagnose import BaseDetector, Candidate, CauseSpec, Finding, Knob, Rule, SignalSpec

LOSS_PLATEAU = SignalSpec("loss_plateau", "the loss stopped falling", "training", impact=0.3, component="compute")
STALE_LR = CauseSpec(
    "stale_learning_rate", "the LR schedule ended early", "step", ("loss_plateau",), "check the LR schedule"
)


class LossPlateau(BaseDetector):
    name = "loss_plateau"
    signals = (LOSS_PLATEAU,)
    knobs = (Knob("high_loss", 10.0, "nats", "convention", "a loss this high has not been trained"),)

    def update(self, tick):
        report = tick.report
        if report is None or report.loss is None:
            return None
        stuck = report.loss > self.thresholds.high_loss
        return [Finding("loss_plateau", 2.0, message="loss stuck high")] if stuck else []


def propose(evidence):
    plateau = evidence.job_signal("loss_plateau")
    if plateau is None:
        return []
    return [Candidate("stale_learning_rate", 0.8, "loss stuck on a stale LR", "check the LR schedule", [plateau])]


RULE = Rule(STALE_LR, propose)
"""
ENTRY_POINTS = (
    "[trainpulse.detectors]\nloss_plateau = acme_detectors:LossPlateau\n"
    "[trainpulse.root_causes]\nstale_learning_rate = acme_detectors:RULE\n"
)


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Install a third-party distribution ``acme-detectors`` made of ``module`` and ``entry_points``."""

    def install(module: str = PLUGIN, entry_points: str = ENTRY_POINTS) -> None:
        (tmp_path / "acme_detectors.py").write_text(module)
        info = tmp_path / "acme_detectors-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-detectors\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(entry_points)
        monkeypatch.syspath_prepend(str(tmp_path))

    yield install
    sys.modules.pop("acme_detectors", None)


def test_a_plugin_signal_gets_its_declared_impact_component_order_and_exported_confidence(install):
    install()
    found = plugins.discover(autoload=True)
    vocabulary = found.vocabulary
    assert vocabulary.impacts["loss_plateau"] == 0.3 and vocabulary.component_of["loss_plateau"] == "compute"
    assert vocabulary.tie_rank["load_imbalance"] < vocabulary.tie_rank["stale_learning_rate"]
    assert vocabulary.tie_rank["stale_learning_rate"] < vocabulary.tie_rank["compute_inefficiency"]
    assert "loss_plateau.high_loss" in {e.key for e in vocabulary.knobs}
    pipeline = build_pipeline(found)
    for t in range(60):
        result = pipeline.update(job(float(t), training={"loss": 50.0}))
    diagnosis = result.diagnosis
    assert [s.name for s in diagnosis.signals] == ["loss_plateau"]
    assert diagnosis.health.score == pytest.approx(100 * (1 - 0.3), abs=0.1)  # its impact, not a default's
    [cause] = diagnosis.root_causes  # the plugin's signal became the plugin's cause
    assert cause.cause == "stale_learning_rate" and cause.signals == ("loss_plateau",)
    exported = _exported(result, vocabulary)
    assert exported["signal"] == {("loss_plateau", "warning"): 1, ("loss_plateau", "critical"): 0}
    assert exported["cause"] == {"stale_learning_rate": cause.confidence}


def test_a_plugin_cause_ranks_by_the_lost_time_of_its_signal_component(install):
    install()
    vocabulary = plugins.discover(autoload=True).vocabulary
    plateau = Signal("loss_plateau", "warning", T0, "loss stuck high")
    data = Signal("dataloader_starvation", "warning", T0, "waits for data")
    ours = Candidate("stale_learning_rate", 0.6, "", "", [plateau])
    theirs = Candidate("input_pipeline_bound", 0.6, "", "", [data])
    ranked = rank_candidates([theirs, ours], vocabulary, {"compute": 0.3, "data": 0.1})
    assert [(c.cause, round(c.confidence, 2)) for c in ranked] == [
        ("stale_learning_rate", 0.75),
        ("input_pipeline_bound", 0.25),
    ]


def test_a_plugin_threshold_is_overridden_like_a_builtin(install):
    install()
    found = plugins.discover(autoload=True)
    pipeline = build_pipeline(found, {"loss_plateau": {"high_loss": 60.0}})
    for t in range(10):
        result = pipeline.update(job(float(t), training={"loss": 50.0}))
    assert result.diagnosis.signals == ()


def _exported(result, vocabulary) -> dict:
    """The plugin's ``trainpulse.signal.active`` and ``root_cause.confidence`` points, as the OTel reader sees
    them."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from trainpulse_otel.publish.otel import DiagnosisPublisher

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("t")
    DiagnosisPublisher(meter, LoggerProvider().get_logger("t"), vocabulary=vocabulary).publish(result)
    points = {
        m.name: m.data.data_points
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    return {
        "signal": {
            (p.attributes["signal"], p.attributes["severity"]): p.value
            for p in points["trainpulse.signal.active"]
            if p.attributes["signal"] == "loss_plateau"
        },
        "cause": {p.attributes["cause"]: p.value for p in points["trainpulse.root_cause.confidence"]},
    }


@pytest.mark.parametrize(
    ("change", "entry_points", "error"),
    [
        (('name = "loss_plateau"', 'name = "ranks"'), None, "the name 'ranks' is taken by detector 'ranks'"),
        ((), "[trainpulse.detectors]\nranks = acme_detectors:LossPlateau\n", "'ranks' is already taken by 'ranks'"),
        (('SignalSpec("loss_plateau"', 'SignalSpec("rank_straggler"'), None, "signal 'rank_straggler' is already"),
        (("signals = (LOSS_PLATEAU,)", "signals = ('loss_plateau',)"), None, "which is not a trainpulse_otel"),
        (("signals = (LOSS_PLATEAU,)", "signals = ()"), None, "declares no signals"),
        (
            (', ("loss_plateau",), "check', ', ("loss_plateu",), "check'),
            None,
            "explains unknown signal(s) 'loss_plateu'",
        ),
        (('"nats", "convention", "a loss', '"nats", "hunch", "a loss'), None, "has basis 'hunch'"),
        (("impact=0.3", "impact=3"), None, "a share of health between 0 and 1"),
        ((), "[trainpulse.detectors]\nbogus = acme_detectors:RULE\n", "is not a valid trainpulse.detectors plugin"),
    ],
)
def test_a_plugin_that_does_not_fit_stops_discovery_naming_it(install, change, entry_points, error):
    module = PLUGIN.replace(*change) if change else PLUGIN
    install(module, entry_points or ENTRY_POINTS)
    with pytest.raises(plugins.PluginError) as raised:
        plugins.discover(autoload=True)
    assert error in str(raised.value) and "acme_detectors" in str(raised.value)


def test_a_plugin_that_fails_to_import_is_logged_and_skipped(install, caplog):
    install("raise ImportError('no acme_gpu library')")
    found = plugins.discover(autoload=True)
    assert "loss_plateau" not in found.detectors and "stale_learning_rate" not in found.root_causes
    assert "failed to import" in caplog.text and "loss_plateau" in caplog.text


def test_autoload_off_loads_the_builtins_alone(install, monkeypatch):
    install()
    monkeypatch.setenv(plugins.AUTOLOAD_ENV, "1")
    found = plugins.discover()
    assert "loss_plateau" not in found.detectors and "stale_learning_rate" not in found.root_causes


BROKEN = SignalSpec("broken", "a plugin bug", "training", 0.1, None)


class Broken:
    name, signals, knobs, every_s, policy = "broken", (BROKEN,), (), 0.0, DEFAULT_POLICY

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


class Stray(Broken):
    """A detector that raises a signal it never declared."""

    name = "stray"

    def update(self, tick):
        from trainpulse_otel.diagnose import Finding

        return [Finding("low_mfu", 3.0), Finding("broken", 3.0)]


def test_a_finding_of_an_undeclared_signal_is_dropped_and_said_once(caplog):
    pipeline = DiagnosticPipeline([Stray()], [])
    for t in range(6):
        result = pipeline.update(job(float(t)))
    assert [s.name for s in result.diagnosis.signals] == ["broken"]
    assert [r.getMessage() for r in caplog.records] == ["detector stray raised undeclared signal(s) low_mfu; dropped"]


def test_a_rule_that_proposes_outside_its_cause_spec_is_dropped_and_said_once(install, caplog):
    install(PLUGIN.replace('return [Candidate("stale_learning_rate"', 'return [Candidate("bad_data_shard"'))
    pipeline = build_pipeline(plugins.discover(autoload=True))
    for t in range(10):
        result = pipeline.update(job(float(t), training={"loss": 50.0}))
    assert [s.name for s in result.diagnosis.signals] == ["loss_plateau"] and result.diagnosis.root_causes == ()
    assert caplog.text.count("proposed a cause or signals its CauseSpec does not declare") == 1


def test_a_pipeline_made_of_parts_that_do_not_fit_is_refused():
    with pytest.raises(SpecError, match="detector 'broken': the name 'broken' is taken"):
        DiagnosticPipeline([Broken(), Broken()], [])
    assert Vocabulary([Broken()], []).signal_names == ("broken",)


class Periodic(Broken):
    """A detector judging every 2 s that notes the ticks it was called on."""

    every_s = 2.0

    def __init__(self, name: str) -> None:
        self.name, self.calls = name, []

    def update(self, tick):
        self.calls.append(tick.ts - T0)


def test_detectors_of_one_period_take_turns_instead_of_sharing_a_tick():
    first, second, third = Periodic("a"), Periodic("b"), Periodic("c")
    pipeline = DiagnosticPipeline([first, second, LowMfu(), third], [])
    for t in range(8):
        pipeline.update(job(float(t)))
    assert first.calls == third.calls == [0.0, 2.0, 4.0, 6.0]
    assert second.calls == [1.0, 3.0, 5.0, 7.0]  # half a period later: the 2-second work spread over two ticks


class Twin(Broken):
    """A detector that declares a fact a built-in already provides."""

    name = "twin"
    signals = (SignalSpec("twin_signal", "a plugin's signal", "training", 0.1, None),)
    provides = (FactSpec("throughput_drop", "share", "a second meaning for the same name"),)


def test_a_fact_two_detectors_declare_stops_start_up_naming_both():
    with pytest.raises(SpecError) as raised:
        DiagnosticPipeline([ThroughputCollapse(), Twin()], [])
    message = str(raised.value)
    assert "fact 'throughput_drop' is already declared by detector" in message
    assert "'twin'" in message and "'throughput'" in message


def test_the_facts_rules_read_are_declared_once_with_their_detector():
    owners = VOCABULARY.fact_owner
    assert owners["throughput_drop"] == "throughput" and owners["checkpoint_write_surge"] == "checkpoint"
    assert owners["low_mfu"] == owners["normal_mfu"] == "mfu"
    assert all(spec.meaning and spec.unit for spec in VOCABULARY.facts.values())


class Gossip(Broken):
    """A detector that returns a fact it never declared."""

    name = "gossip"

    def update(self, tick):
        return []

    def facts(self):
        return {"rumour": 1.0}


def test_an_undeclared_fact_is_dropped_and_said_once(caplog):
    pipeline = DiagnosticPipeline([Gossip()], [])
    assert pipeline.facts() == {} and pipeline.facts() == {}
    assert [r.getMessage() for r in caplog.records] == [
        "detector gossip returned fact 'rumour', which it does not declare: dropped"
    ]


#: A third party's straggler detector replacing the built-in ``ranks``: the same signal, its own judgement.
REPLACEMENT = """
from trainpulse_otel.diagnose import BaseDetector, Finding, SignalSpec

RANK_STRAGGLER = SignalSpec(
    "rank_straggler", "a rank late at the collective (acme's judgement)", "ranks", 0.1, "sync", role="straggler"
)


class AcmeStraggler(BaseDetector):
    name = "ranks"
    signals = (RANK_STRAGGLER,)

    def update(self, tick):
        report = tick.report
        if report is None or report.loss is None:
            return None
        return [Finding("rank_straggler", 1.7, message="acme says rank 3 is late", subject={"rank": 3})]
"""


def test_a_disabled_builtin_leaves_the_vocabulary_and_a_plugin_may_take_its_name_and_signal(install):
    off = plugins.discover(autoload=False, disabled=["rank_straggler"])
    assert "ranks" not in off.detectors and "rank_straggler" not in off.vocabulary.signal_names
    assert not any(e.key.startswith("rank_straggler.") for e in off.vocabulary.knobs)
    assert "rank_straggler" not in _scored(build_pipeline(off), off.vocabulary)
    install(REPLACEMENT, "[trainpulse.detectors]\nranks = acme_detectors:AcmeStraggler\n")
    with pytest.raises(plugins.PluginError, match="'ranks' is already taken"):
        plugins.discover(autoload=True)  # the built-in still holds the name
    replaced = plugins.discover(autoload=True, disabled=["ranks"])
    assert replaced.vocabulary.signals["rank_straggler"].meaning.endswith("(acme's judgement)")
    assert replaced.vocabulary.roles["straggler"] == "rank_straggler"
    pipeline = build_pipeline(replaced)
    for t in range(4):
        result = pipeline.update(job(float(t), training={"loss": 2.0}))
    (signal,) = [s for s in result.diagnosis.signals if s.name == "rank_straggler"]
    assert signal.subject == {"rank": 3} and result.scores["rank_straggler"] == 1.7


def test_a_name_no_builtin_has_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match=r"detectors\.disabled: no built-in detector or signal 'rank_stragler'"):
        plugins.discover(autoload=False, disabled=["rank_stragler"])


def test_a_role_is_held_by_one_signal():
    taker = SignalSpec("hang_watch", "a second stall", "job", 0.1, None, role="stall")

    class Taker(Broken):
        name, signals = "taker", (taker,)

    with pytest.raises(SpecError, match="takes role 'stall', which 'training_stalled' holds"):
        Vocabulary([*DETECTORS, Taker], [])
    with pytest.raises(SpecError, match="has role 'waiting'"):
        Vocabulary([type("Odd", (Taker,), {"signals": (replace(taker, role="waiting"),)})], [])


def _scored(pipeline, vocabulary) -> dict[str, float]:
    """The ``trainpulse.signal.score`` points a publisher of ``vocabulary`` exports after a few ticks."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from trainpulse_otel.publish.otel import DiagnosisPublisher

    reader = InMemoryMetricReader()
    publisher = DiagnosisPublisher(
        MeterProvider(metric_readers=[reader]).get_meter("t"), LoggerProvider().get_logger("t"), vocabulary=vocabulary
    )
    for t in range(6):
        publisher.publish(pipeline.update(job(float(t), training={"mfu": 0.05})))
    return {
        p.attributes["signal"]: p.value
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "trainpulse.signal.score"
        for p in m.data.data_points
    }


def test_each_judged_signal_s_score_is_exported_beside_its_state():
    scores = _scored(build_pipeline(plugins.discover(autoload=False)), VOCABULARY)
    assert scores["low_mfu"] >= 2.0  # MFU 0.05 against the 0.20 warning: four times past it
    assert scores["sequence_padding"] == 0.0 or "sequence_padding" not in scores  # judged fine, or never judged
    assert all(value >= 0.0 for value in scores.values())
