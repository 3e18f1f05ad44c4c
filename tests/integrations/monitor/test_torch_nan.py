"""A real PyTorch loop on the CPU whose learning rate blows up: the loss goes NaN, the loop keeps running,
and the monitor keeps reporting the step's other fields and raises ``nonfinite_loss`` — in-process and
over REST to a real waitress daemon."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from tests.integrations.monitor.tiny_lm import VOCAB, TinyLM, batches  # noqa: E402 - after the guard
from trainpulse_otel import TrainingMonitor  # noqa: E402 - after the importorskip guard
from trainpulse_otel.integrations.torch import batch_stats  # noqa: E402 - after the importorskip guard

STEPS, BLOW_UP_AT = 60, 20


def diverging_train(monitor: TrainingMonitor) -> list[float]:
    """Plain SGD; from step BLOW_UP_AT the learning rate is 1e12 (a bad schedule), so the loss overflows to NaN."""
    torch.manual_seed(0)
    model = TinyLM()
    params = list(model.parameters())
    losses = []
    for i, batch in enumerate(monitor.wrap_dataloader(batches(STEPS))):
        with monitor.step(**batch_stats(batch)) as step:
            logits = model(**batch)
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch["input_ids"].reshape(-1))
            loss.backward()
            lr = 1e-3 if i < BLOW_UP_AT else 1e12
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
                    p.grad = None
            step.loss = loss.detach()
        losses.append(loss.item())
        if i % 10 == 0:
            monitor.flush()  # a few reports before the divergence, as a 1 s interval would give
    return losses


def test_in_process_a_nan_loss_keeps_the_other_fields_and_raises_nonfinite_loss():
    monitor = TrainingMonitor(model_name="tiny-lm", interval=60.0, hardware="none", precision="fp32")
    try:
        losses = diverging_train(monitor)
        monitor.flush()
        monitor.flush()
        training = monitor._destination.engine.frame.training
        diagnosis = monitor.diagnosis()
    finally:
        monitor.close()
    first_nan = next(i for i, x in enumerate(losses) if math.isnan(x))
    assert BLOW_UP_AT <= first_nan < STEPS - 5  # the loop really diverged, and kept running
    assert math.isnan(training.loss)  # reported as NaN, not dropped
    assert training.step_time_ms > 0 and training.tokens_per_sec > 0 and training.global_step == STEPS
    (signal,) = [s for s in diagnosis["signals"] if s["name"] == "nonfinite_loss"]
    assert signal["severity"] == "critical" and signal["evidence"]["field"] == "loss"
    assert diagnosis["root_causes"][0]["cause"] == "numerical_instability"


@pytest.mark.e2e
def test_over_rest_a_nan_loss_lands_with_its_step_and_raises_nonfinite_loss(served):
    monitor = TrainingMonitor(model_name="tiny-lm", endpoint=served.url, interval=60.0, precision="fp32")
    try:
        diverging_train(monitor)
        monitor.flush()
    finally:
        monitor.close()
    assert monitor.stats["rejected"] == 0 and monitor.stats["sent"] >= 2
    served.engine.tick()
    served.engine.tick()
    status, snapshot = served.get_json("/v1/snapshot")
    assert status == 200
    training = snapshot["training"]
    assert math.isnan(training["loss"]) and training["step_time_ms"] > 0 and training["tokens_per_sec"] > 0
    names = {s["name"]: s for s in snapshot["diagnosis"]["signals"]}
    assert names["nonfinite_loss"]["severity"] == "critical"
    assert snapshot["diagnosis"]["root_causes"][0]["cause"] == "numerical_instability"


@pytest.mark.e2e
def test_over_rest_a_nan_loss_is_accepted_but_a_nan_tokens_per_sec_is_a_400_naming_it(served):
    headers = {"Content-Type": "application/json"}
    body = json.dumps({"global_step": 7, "loss": float("nan"), "grad_norm": float("inf"), "step_time_ms": 812.5})
    status, _, _ = served.send("POST", "/v1/training", body.encode(), headers)
    assert status == 202
    landed = served.engine.latest.current().training
    assert math.isnan(landed.loss) and landed.grad_norm == math.inf and landed.step_time_ms == 812.5
    bad = json.dumps({"global_step": 8, "loss": 2.0, "tokens_per_sec": float("nan"), "step_time_ms": 800.0})
    status, _, raw = served.send("POST", "/v1/training", bad.encode(), headers)
    answer = json.loads(raw)
    assert status == 400 and answer["field"] == "tokens_per_sec" and "finite" in answer["error"]
    assert served.engine.latest.current().training.global_step == 7  # the bad report did not land
