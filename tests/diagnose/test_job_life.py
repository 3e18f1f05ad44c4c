"""The diagnosis's ``goodput.job`` block: a job's attempts across a restart, what the restart cost, its
checkpoints, the life's ETTR and the interval to checkpoint at."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.diagnose.builders import T0, job
from trainpulse_otel.diagnose.types import Goodput
from trainpulse_otel.runtime import build_pipeline, discover
from trainpulse_otel.samples import CHECKPOINT_LOADED, WORKERS_RESTARTED, LogEvent

RESTART = LogEvent(
    T0 + 100,
    WORKERS_RESTARTED,
    "[default] Worker group FAILED. 1/1 attempts left; will restart worker group",
    details={"state": "FAILED", "remaining": 1, "max_restarts": 1},
)


#: torchtitan's load line, 10 s after the restart: the new attempt's checkpoint load took 5 s of the gap.
LOADED = LogEvent(
    T0 + 110, CHECKPOINT_LOADED, "Finished loading the checkpoint in 5.00 seconds.", details={"duration_s": 5.0}
)


def life(save_every: int | None = None, load: bool = False) -> dict:
    """Steps 1-80 a second apart, killed; torchrun restarts at +100 s; steps again from 51 at +119 s to +189 s.
    ``save_every``: a 2 s checkpoint save in every that many steps."""
    pipeline = build_pipeline(discover(autoload=False))

    def report(t: int, step: int) -> dict:
        saved = save_every is not None and step % save_every == 0
        return {"global_step": step, "step_time_ms": 1000.0, **({"checkpoint_ms": 2000.0} if saved else {})}

    for t in range(80):
        pipeline.update(job(float(t), training=report(t, 1 + t)))
    pipeline.update(replace(job(100.0, training={"global_step": 80}), events=(RESTART,)))  # the last report, again
    if load:
        pipeline.update(replace(job(110.0, training={"global_step": 80}), events=(LOADED,)))
    for t in range(119, 190):
        result = pipeline.update(job(float(t), training=report(t, 51 + t - 119)))
    goodput = result.diagnosis.goodput
    assert goodput is not None and goodput.job is not None
    return goodput.to_dict()


def test_a_restart_from_a_checkpoint_is_two_attempts_with_the_re_done_steps_lost():
    block = life()["job"]
    first, second = block["attempts"]
    assert (first["first_step"], first["last_step"], first["end_reason"]) == (1, 80, "failure")
    assert (second["first_step"], second["end_reason"]) == (51, None) and second["start"] == T0 + 119
    assert block["interruptions"] == 1 and block["mtbf_s"] == pytest.approx(79.0 + 70.0)
    assert block["lost_s"] == {"lost_progress": 30.0, "restart": 40.0, "checkpoint_load": 0.0}
    goodput = life()
    badput = goodput["badput_s"]
    assert badput["lost_progress"] == pytest.approx(30.0) and badput["restart"] > 0  # beside the causes
    assert sum(badput.values()) == pytest.approx((1 - goodput["ratio"]) * goodput["wall_s"], abs=0.01)  # adds up
    assert block["ettr"] == pytest.approx(goodput["ratio"], abs=1e-4)  # the ledger's clock: the life's ratio
    assert block["recommended_checkpoint_interval_s"] is None  # no save seen: no save cost to weigh


def test_with_saves_the_block_gives_their_cost_and_cadence_and_daly_s_interval():
    block = life(save_every=10)["job"]
    checkpoint = block["checkpoint"]
    assert checkpoint["save_s"] == pytest.approx(2.0) and checkpoint["interval_s"] == pytest.approx(10.0)
    assert checkpoint["last_step"] == 120
    recommended = block["recommended_checkpoint_interval_s"]
    assert recommended == pytest.approx(23.1, abs=0.1)  # Daly: sqrt(2 x 2 x 149) x (1 + 0.027 + 0.001) - 2


def test_the_block_round_trips_through_the_snapshot_form():
    goodput = life()
    assert Goodput.from_dict(goodput).to_dict() == goodput


def test_the_life_s_figures_are_on_metrics_under_the_contract_s_names():
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client.parser import text_string_to_metric_families

    from trainpulse_otel.diagnose import PipelineResult
    from trainpulse_otel.diagnose.types import Diagnosis
    from trainpulse_otel.publish.otel import DiagnosisPublisher
    from trainpulse_otel.telemetry.prometheus import PrometheusExposition

    exposition = PrometheusExposition()
    meter = MeterProvider(metric_readers=[exposition.reader]).get_meter("trainpulse_otel")
    publisher = DiagnosisPublisher(meter, LoggerProvider().get_logger("t"))
    goodput = Goodput.from_dict(life(save_every=10))
    publisher.publish(PipelineResult(Diagnosis(ts=T0 + 189, goodput=goodput)))
    got = {s.name: s.value for f in text_string_to_metric_families(exposition.render().decode()) for s in f.samples}
    assert got["trainpulse_job_ettr_ratio"] == pytest.approx(goodput.job["ettr"])
    assert got["trainpulse_job_attempts_total"] == 2
    assert got["trainpulse_checkpoint_interval_recommended_seconds"] == pytest.approx(23.1, abs=0.1)


def test_a_checkpoint_load_the_job_told_is_its_own_part_of_the_gap():
    goodput = life(load=True)
    assert goodput["job"]["lost_s"] == {"lost_progress": 30.0, "restart": 35.0, "checkpoint_load": 5.0}
    assert goodput["job"]["checkpoint"]["load_s"] == 5.0
    assert goodput["badput_s"]["checkpoint_load"] == pytest.approx(5.0)
    assert sum(goodput["badput_s"].values()) == pytest.approx((1 - goodput["ratio"]) * goodput["wall_s"], abs=0.01)


def test_before_its_first_interruption_a_job_s_interval_rests_on_the_configured_mtbf_prior():
    pipeline = build_pipeline(discover(autoload=False), mtbf_prior_s=4 * 3600.0)
    for t in range(60):
        saved = {"checkpoint_ms": 2000.0} if (t + 1) % 10 == 0 else {}
        result = pipeline.update(job(float(t), training={"global_step": t + 1, "step_time_ms": 1000.0, **saved}))
    block = result.diagnosis.goodput.to_dict()["job"]
    assert block["interruptions"] == 0 and block["mtbf_s"] is None
    inputs = block["interval_inputs"]
    assert inputs["mtbf_from"] == "prior" and inputs["mtbf_s"] == 14400.0 and inputs["save_s"] == 2.0
    assert block["recommended_checkpoint_interval_s"] == pytest.approx(238.2, abs=0.5)  # Daly: C 2 s, M 4 h
    assert inputs["current_interval_s"] == 10.0 and inputs["current_ettr"] < inputs["expected_ettr"]


def test_the_sdk_s_checkpoint_load_phase_is_its_own_part_of_the_gap():
    pipeline = build_pipeline(discover(autoload=False))
    for t in range(80):
        pipeline.update(job(float(t), training={"global_step": 1 + t, "step_time_ms": 1000.0}))
    resumed = {"global_step": 51, "step_time_ms": 1000.0, "checkpoint_load_ms": 5000.0}  # monitor.checkpoint_loaded
    pipeline.update(job(119.0, training=resumed))
    for t in range(120, 150):
        result = pipeline.update(job(float(t), training={"global_step": 51 + t - 119, "step_time_ms": 1000.0}))
    block = result.diagnosis.goodput.to_dict()["job"]
    assert len(block["attempts"]) == 2 and block["attempts"][1]["first_step"] == 51
    assert block["lost_s"] == {"lost_progress": 30.0, "restart": 35.0, "checkpoint_load": 5.0}


def pid_life(stale_first: bool) -> dict:
    """Steps 1-40 from process 100; after a 20 s gap, steps 41-70 from process 200 (the job had checkpointed at
    its last step: nothing goes back). ``stale_first``: the torchrun line came first, and the new attempt's first
    report still carries the old process's heartbeat."""
    pipeline = build_pipeline(discover(autoload=False))
    for t in range(40):
        pipeline.update(job(float(t), training={"global_step": 1 + t, "step_time_ms": 1000.0}, rank={"pid": 100}))
    if stale_first:
        pipeline.update(replace(job(50.0, training={"global_step": 40}, rank={"pid": 100}), events=(RESTART,)))
    for t in range(59, 89):
        pid = 100 if stale_first and t == 59 else 200
        training = {"global_step": 41 + t - 59, "step_time_ms": 1000.0}
        result = pipeline.update(job(float(t), training=training, rank={"pid": pid}))
    return result.diagnosis.goodput.to_dict()["job"]


@pytest.mark.parametrize("stale_first", [False, True])
def test_reports_from_a_new_process_after_a_gap_begin_one_new_attempt(stale_first):
    block = pid_life(stale_first)
    first, second = block["attempts"]
    assert (first["last_step"], first["end_reason"], second["first_step"]) == (40, "failure", 41)
    assert block["lost_s"]["lost_progress"] == 0.0 and block["lost_s"]["restart"] == pytest.approx(20.0)
