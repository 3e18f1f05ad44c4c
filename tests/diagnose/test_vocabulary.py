"""The vocabulary: the tables the core derives from the specs, and threshold overrides checked against knobs."""

from __future__ import annotations

import re

import pytest

from tests.diagnose.builders import job
from trainpulse_otel.diagnose import VOCABULARY, Knob, SignalSpec, SpecError, ThresholdError, Thresholds, Vocabulary
from trainpulse_otel.diagnose.builtins import DETECTORS
from trainpulse_otel.diagnose.detectors.forecast import GpuOomRisk, HostOomRisk
from trainpulse_otel.diagnose.detectors.inputs import DataloaderStarvation
from trainpulse_otel.diagnose.detectors.llm import LowMfu
from trainpulse_otel.diagnose.detectors.ranks import RankStraggler
from trainpulse_otel.diagnose.detectors.stall_bounds import STALL_BOUNDS
from trainpulse_otel.diagnose.pipeline import DiagnosticPipeline
from trainpulse_otel.diagnose.spec import TRAINING


def test_every_builtin_signal_has_its_tables_from_its_spec():
    assert set(VOCABULARY.impacts) == set(VOCABULARY.signal_names)
    assert VOCABULARY.component_of["rank_straggler"] == "sync" and "loss_spike" not in VOCABULARY.component_of
    assert VOCABULARY.explainer_claims == {"rank_straggler", "training_stalled"}
    assert VOCABULARY.booked == {
        "data": "input_pipeline_bound",
        "tokenizer": "tokenizer_bound",
        "all_reduce": "communication_bound",
        "checkpoint": "checkpoint_io_bound",
        "bubble": "pipeline_bubbles",
        "numerics": "numerical_instability",
    }
    assert VOCABULARY.waits == {*list(VOCABULARY.booked.values())[:5], "load_imbalance"}


def test_a_knob_two_detectors_share_is_one_name_and_one_override_for_both():
    [entry] = [e for e in VOCABULARY.knobs if e.key == "oom_risk.horizon_s"]
    assert entry.detectors == ("gpu_oom", "host_oom")
    overrides = VOCABULARY.resolve({"oom_risk": {"horizon_s": 900}, "low_mfu": {"warning": 0.3}})
    assert overrides == {"gpu_oom": {"horizon_s": 900.0}, "host_oom": {"horizon_s": 900.0}, "mfu": {"warning": 0.3}}
    gpu, host = (cls(VOCABULARY.thresholds(cls, overrides)) for cls in (GpuOomRisk, HostOomRisk))
    assert gpu.horizon_s == host.horizon_s == 900.0
    assert VOCABULARY.knob_values(overrides)["oom_risk.horizon_s"] == 900.0


def test_an_overridden_threshold_changes_what_a_detector_decides():
    def low_mfu_raised(thresholds: Thresholds | None) -> bool:
        pipeline = DiagnosticPipeline([LowMfu(thresholds)], [])
        for t in range(6):
            result = pipeline.update(job(float(t), training={"mfu": 0.25}))
        return "low_mfu" in {s.name for s in result.diagnosis.signals}

    assert not low_mfu_raised(None)  # 0.25 MFU is above the declared 0.20 warning
    assert low_mfu_raised(VOCABULARY.thresholds(LowMfu, VOCABULARY.resolve({"low_mfu": {"warning": 0.3}})))


@pytest.mark.parametrize("value", [32, 32.0])
def test_a_count_knob_takes_whole_numbers(value):
    got = VOCABULARY.resolve({"loss_spike": {"min_history": value}})
    assert got == {"loss_spike": {"min_history": 32}} and isinstance(got["loss_spike"]["min_history"], int)


@pytest.mark.parametrize(
    ("value", "error"), [(True, "must be a number"), (2.5, "whole number"), (1, "at least 2"), ("8", "number")]
)
def test_a_count_knob_refuses_what_is_not_a_whole_number_in_its_range(value, error):
    with pytest.raises(ThresholdError, match=error) as raised:
        VOCABULARY.resolve({"loss_spike": {"min_history": value}})
    assert raised.value.key == "detectors.loss_spike.min_history"


def test_a_share_knob_keeps_its_range_and_finite_values():
    with pytest.raises(ThresholdError, match=r"must be 0 to 1 \(share\), got 1.5"):
        VOCABULARY.resolve({"sequence_padding": {"warning": 1.5}})
    with pytest.raises(ThresholdError, match="finite"):
        VOCABULARY.resolve({"sequence_padding": {"warning": float("nan")}})


def test_every_builtin_detector_is_built_with_its_declared_knobs_and_nothing_else():
    for cls in DETECTORS:
        detector = cls()
        declared = {k.name: k.value for k in (*cls.knobs, *(knob for _, knob in cls.reads))}
        assert vars(detector.thresholds) == declared, cls.name
    with pytest.raises(AttributeError, match="no knob 'warnin' is declared"):
        _ = Thresholds([Knob("warning", 0.1, "share", "convention", "why")]).warnin


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        (
            {"rank_straggler": {"critical_slowdown": 0.05}},
            "critical_slowdown: must be at least rank_straggler.min_slowdown",
        ),
        ({"low_mfu": {"critical": 0.3}}, "low_mfu.warning: must be at least low_mfu.critical (0.3), got 0.2"),
        ({"oom_risk": {"critical_s": 3600}}, "oom_risk.horizon_s: must be at least oom_risk.critical_s"),
    ],
)
def test_an_override_may_not_put_a_knob_below_the_one_it_must_exceed(overrides, error):
    with pytest.raises(ThresholdError, match=re.escape(error)):
        VOCABULARY.resolve(overrides)
    signal = next(iter(overrides))
    VOCABULARY.resolve({signal: {**overrides[signal], **_raised_together(signal)}})  # moved together: fine


def _raised_together(signal: str) -> dict:
    return {"rank_straggler": {"min_slowdown": 0.01}, "low_mfu": {"warning": 0.4}, "oom_risk": {"horizon_s": 7200}}[
        signal
    ]


def test_a_bound_read_from_another_signal_moves_with_its_owner_s_override():
    [entry] = [e for e in VOCABULARY.knobs if e.key == "training_stalled.min_stall_s"]
    assert entry.detectors[0] == "stall" and {"ranks", "dataloader", "allreduce"} <= set(entry.detectors)
    overrides = VOCABULARY.resolve({"training_stalled": {"min_stall_s": 45}})
    straggler = RankStraggler(VOCABULARY.thresholds(RankStraggler, overrides))
    loader = DataloaderStarvation(VOCABULARY.thresholds(DataloaderStarvation, overrides))
    assert straggler.thresholds.min_stall_s == loader.thresholds.min_stall_s == 45.0
    assert straggler.thresholds.step_multiple == 10.0  # read, not overridden: the owner's declared value
    assert VOCABULARY.knob_values(overrides)["training_stalled.min_stall_s"] == 45.0
    with pytest.raises(ThresholdError, match="unknown threshold"):  # a reader's name for it is no knob of its own
        VOCABULARY.resolve({"rank_straggler": {"min_stall_s": 45}})


class _Reader:
    name = "reader"
    signals = (SignalSpec("reader_signal", "a detector that reads another's bound", TRAINING, 0.1, None),)
    knobs = ()

    def update(self, tick):
        return None


@pytest.mark.parametrize(
    ("reads", "knobs", "error"),
    [
        ((("training_stalled", Knob("nope_s", 1.0, "s", "convention", "why")),), (), "which no detector declares"),
        ((("training_stalled", Knob("min_stall_s", 31.0, "s", "convention", "why")),), (), "other than 'stall'"),
        ((STALL_BOUNDS[0],), (Knob("min_stall_s", 5.0, "s", "convention", "why"),), "declares a knob of that name"),
    ],
)
def test_a_bound_read_from_nowhere_or_differently_is_refused_naming_the_reader(reads, knobs, error):
    reader = type("Reader", (_Reader,), {"reads": reads, "knobs": knobs})()
    with pytest.raises(SpecError, match=f"detector 'reader': .*{error}"):
        Vocabulary([*(cls() for cls in DETECTORS), reader], [])
