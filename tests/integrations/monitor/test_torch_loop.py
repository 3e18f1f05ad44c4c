"""A tiny PyTorch language model trained on the CPU with the monitor, in-process."""

from __future__ import annotations

import time

import pytest

#: A real training loop whose data-loader wait is what is judged: run alone, after the parallel pass (scripts/test).
pytestmark = pytest.mark.serial

from tests.integrations.monitor.tiny_lm import BATCH, SEQ, VOCAB, TinyLM, batches, nn, torch  # noqa: E402
from trainpulse_otel import TrainingMonitor  # noqa: E402 - after the importorskip guard
from trainpulse_otel.integrations.torch import batch_stats  # noqa: E402 - after the importorskip guard
from trainpulse_otel.mfu import flops_per_token  # noqa: E402 - after the importorskip guard


def cpu_matmul_peak() -> float:
    """This CPU's FLOP/s on a large float32 matmul: the 'peak' an MFU on CPU is measured against."""
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    a @ b
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.2:
        a @ b
        runs += 1
    return 2 * 512**3 * runs / (time.perf_counter() - start)


def train(monitor: TrainingMonitor, steps: int, delay_s: float = 0.0) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    params = list(model.parameters())
    for batch in monitor.wrap_dataloader(batches(steps, delay_s)):
        with monitor.step(**batch_stats(batch)):
            logits = model(**batch)
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch["input_ids"].reshape(-1))
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p -= 1e-3 * p.grad
                    p.grad = None
        monitor.record(loss=loss.detach())


def run(steps: int, delay_s: float) -> tuple[dict, dict]:
    monitor = TrainingMonitor(
        model_name="tiny-lm",
        model=TinyLM(),
        seq_len=SEQ,
        interval=0.05,
        hardware="none",
        peak_flops=cpu_matmul_peak(),
        precision="fp32",
    )
    try:
        train(monitor, steps, delay_s)
        monitor.flush()
        training = monitor._destination.engine.frame.training
        return training, monitor.diagnosis()
    finally:
        monitor.close()


@pytest.fixture(scope="module")
def fast_run():
    return run(steps=30, delay_s=0.0)


@pytest.fixture(scope="module")
def slow_loader_run():
    return run(steps=30, delay_s=0.03)


def test_fast_loop_fields_are_populated_and_plausible(fast_run):
    training, _ = fast_run
    assert training.global_step == 30 and training.model_name == "tiny-lm"
    assert 0 < training.data_wait_ms < training.step_time_ms
    assert training.data_wait_ms / training.step_time_ms < 0.3  # an in-memory loader is fast
    tokens_per_step = training.tokens_per_sec * training.step_time_ms / 1000
    assert SEQ // 2 * BATCH <= tokens_per_step <= SEQ * BATCH  # real tokens of one batch
    assert SEQ // 2 <= training.avg_seq_len <= training.max_seq_len == SEQ
    assert 0 < training.mfu < 0.9  # a tiny model uses a CPU poorly, but not not at all
    per_token = flops_per_token(TinyLM(), seq_len=SEQ)
    assert training.tflops == pytest.approx(per_token * training.tokens_per_sec / 1e12, rel=1e-6)
    assert training.loss > 0


def test_slow_loader_shows_as_data_wait(slow_loader_run):
    training, _ = slow_loader_run
    assert training.data_wait_ms >= 25  # 30 ms per batch
    assert training.data_wait_ms / training.step_time_ms > 0.5


def test_slow_loader_is_diagnosed_input_pipeline_bound(slow_loader_run):
    _, diagnosis = slow_loader_run
    assert "dataloader_starvation" in {s["name"] for s in diagnosis["signals"]}
    assert diagnosis["root_causes"][0]["cause"] == "input_pipeline_bound"


def test_fast_loader_is_not_input_pipeline_bound(fast_run):
    _, diagnosis = fast_run
    assert "input_pipeline_bound" not in {c["cause"] for c in diagnosis["root_causes"]}
