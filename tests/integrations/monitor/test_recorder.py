"""The monitor's hot path and drain, in-process, without torch."""

from __future__ import annotations

import time

import pytest

from trainpulse_otel import TrainingMonitor


@pytest.fixture
def monitor():
    m = TrainingMonitor(model_name="unit", interval=3600, hardware="none", flops_per_token=1e6, peak_flops=1e12)
    yield m
    m.close()


def test_steps_phases_and_data_waits_make_one_report(monitor):
    for _batch in monitor.wrap_dataloader(_slow(range(3), 0.02)):
        with monitor.step(tokens=100, samples=2, seq_lens=[40, 50]):
            with monitor.phase("sync"):
                time.sleep(0.01)
            time.sleep(0.01)
    sample = monitor.drain()
    assert sample.global_step == 3 and sample.model_name == "unit"
    assert sample.data_wait_ms == pytest.approx(20, abs=15)
    assert sample.sync_wait_ms == pytest.approx(10, abs=8)
    assert sample.step_time_ms >= sample.data_wait_ms + sample.sync_wait_ms  # the iteration time
    assert sample.tokens_per_sec == pytest.approx(100 / (sample.step_time_ms / 1000), rel=0.01)
    assert sample.avg_seq_len == 45 and sample.max_seq_len == 50
    assert 0 < sample.mfu <= 1
    assert monitor.drain() is None  # nothing new since


def test_wrapped_loader_keeps_length_and_attributes(monitor):
    class Loader(list):
        batch_size = 4

    wrapped = monitor.wrap_dataloader(Loader([1, 2, 3]))
    assert len(wrapped) == 3 and wrapped.batch_size == 4 and list(wrapped) == [1, 2, 3]


def test_a_phase_between_steps_counts_toward_the_next_iteration(monitor):
    with monitor.step():
        pass
    with monitor.phase("checkpoint"):
        time.sleep(0.03)
    with monitor.step():
        pass
    sample = monitor.drain()
    assert sample.checkpoint_ms >= 25
    assert sample.step_time_ms >= 25 / 2  # the save is in the second step's iteration time


def test_a_resume_counts_steps_on_from_the_checkpoint_and_reports_its_load_apart_from_the_step(monitor):
    with monitor.phase("checkpoint_load"):
        time.sleep(0.03)
    monitor.checkpoint_loaded(30)
    with monitor.step():
        pass
    first = monitor.drain()
    assert first.global_step == 31  # the step after the checkpoint's
    assert first.checkpoint_load_ms >= 25 and first.step_time_ms < 25  # the load is the restart's, no step's
    monitor.checkpoint_loaded(40, seconds=2.5)  # a load timed elsewhere
    for _ in range(2):
        with monitor.step():
            pass
    second = monitor.drain()
    assert second.global_step == 42 and second.checkpoint_load_ms == pytest.approx(2500.0)
    monitor.checkpoint_loaded(-1)  # refused, never raised
    monitor.checkpoint_loaded("50")
    assert monitor.stats["invalid_fields"] == 2


def test_hot_path_never_raises(monitor, caplog):
    with monitor.phase("no-such-phase"):
        pass
    monitor.add_phase_time("also-unknown", 1.0)
    monitor.record(loss="high", not_a_field=1, mfu=3.0, learning_rate=1e-3)
    with monitor.step(tokens=1):
        pass
    sample = monitor.drain()
    assert sample.learning_rate == 1e-3 and sample.loss is None and sample.mfu <= 1
    assert monitor.stats["invalid_fields"] == 3
    assert "unknown phase 'no-such-phase'" in caplog.text


def test_a_failing_step_is_not_recorded_and_its_error_goes_through(monitor):
    with pytest.raises(RuntimeError, match="out of memory"), monitor.step(tokens=10):
        raise RuntimeError("out of memory")
    with monitor.step(tokens=10):
        pass
    assert monitor.drain().global_step == 1


def test_a_fault_inside_trainpulse_is_counted_not_raised(monitor):
    def broken_hook(*_args):
        raise ZeroDivisionError("bug")

    monitor._recorder.step_hook = broken_hook
    with monitor.step():
        pass
    assert monitor.stats["faults"] == 1


def test_recorded_global_step_rebases_the_counter(monitor):
    with monitor.step():
        pass
    monitor.record(global_step=1000, loss=1.0)
    assert monitor.drain().global_step == 1000
    with monitor.step():
        pass
    assert monitor.drain().global_step == 1001


def test_full_buffer_drops_the_oldest_and_counts_them():
    m = TrainingMonitor(interval=3600, hardware="none", buffer_steps=5)
    try:
        for _ in range(8):
            with m.step():
                pass
        assert m.stats["dropped_steps"] == 3
        assert m.drain().global_step == 8
    finally:
        m.close()


def test_begin_and_end_step_for_callbacks(monitor):
    monitor.begin_step()
    time.sleep(0.01)
    monitor.end_step(tokens=50, samples=5)
    monitor.end_step(tokens=50)  # no open step: ignored
    sample = monitor.drain()
    assert sample.global_step == 1 and sample.step_time_ms >= 9 and sample.samples_per_sec > 0


def test_configuration_errors_raise_at_construction():
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch'"):
        TrainingMonitor(batch=3)
    with pytest.raises(ValueError, match="world_size"):
        TrainingMonitor(world_size=0)
    with pytest.raises(ValueError, match="hardware"):
        TrainingMonitor(hardware="gpu")
    with pytest.raises(ValueError, match="interval"):
        TrainingMonitor(interval=0)


def test_in_process_reports_pass_through_the_otel_instruments():
    m = TrainingMonitor(model_name="otel", interval=3600, hardware="none", precision="bf16", world_size=1)
    try:
        with m.step(tokens=10):
            pass
        m.record(loss=0.5)
        m.flush()
        engine = m._destination.engine
        frame = engine.frame  # read back from the samples the OTel instruments observe
        assert frame.training.model_name == "otel" and frame.training.loss == 0.5
        assert frame.training.precision == "bf16" and frame.training.tokens_per_sec > 0
        assert set(m.diagnosis()) == {"health", "signals", "root_causes", "goodput"}
        assert m.stats["ticks"] >= 1
    finally:
        m.close()
        m.close()  # idempotent


def _slow(iterable, seconds):
    for item in iterable:
        time.sleep(seconds)
        yield item
