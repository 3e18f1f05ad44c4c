"""In-process mode exports through the standard OTEL_* variables, to a real OTLP receiver."""

import time

from tests.exports.receivers import HttpReceiver
from trainpulse_otel import TrainingMonitor


def test_in_process_monitor_pushes_its_metrics_over_otlp(monkeypatch):
    receiver = HttpReceiver()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "my-training-job")
        monitor = TrainingMonitor(model_name="tiny", interval=0.2, hardware="none")
        for _ in range(5):
            with monitor.step(tokens=4096, samples=8):
                time.sleep(0.01)
        monitor.close()  # flushes the exporters
        assert receiver.received.wait_for(lambda r: r.metric_points("trainpulse.training.step_time"))
        _, point = receiver.received.metric_points("trainpulse.training.step_time")[-1]
        assert 5.0 <= point.as_double < 1000.0
        assert receiver.received.resource_attributes()["service.name"] == "my-training-job"
        assert receiver.received.metric_points("trainpulse.health.score")
    finally:
        receiver.close()
