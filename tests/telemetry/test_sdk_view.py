"""What the OTel SDK collects from the instruments is the frame the diagnosis reads back from the samples."""

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.telemetry.sdk_frames import sdk_frame
from trainpulse_otel.collect.base import Collected
from trainpulse_otel.samples import GpuSample, HostSample, RankSample, TrainingSample
from trainpulse_otel.telemetry.conversion import observe
from trainpulse_otel.telemetry.instruments import METER_NAME, register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples
from trainpulse_otel.telemetry.read_back import frame_from_samples

GPUS = tuple(
    GpuSample(
        index=i,
        uuid=f"GPU-{i:04d}",
        name="NVIDIA H100 80GB HBM3",
        utilization_percent=97.0 + i / 10,
        memory_utilization_percent=40.0,
        memory_used_bytes=60 << 30,
        memory_total_bytes=80 << 30,
        temperature_celsius=65.5,
        power_watts=612.25,
        power_limit_watts=700.0,
        sm_clock_mhz=1980.0,
        max_sm_clock_mhz=1980.0,
        throttle_reasons=("sw_thermal",) if i == 5 else (),
        ecc_uncorrected_errors=0,
    )
    for i in range(8)
)
HOST = HostSample(
    cpu_percent=23.5,
    cpu_count=192,
    load1=20.0,
    load5=19.0,
    load15=18.5,
    memory_total_bytes=2 << 40,
    memory_available_bytes=1 << 40,
    swap_total_bytes=0,
    swap_used_bytes=0,
    disk_read_bytes_per_sec=1e6,
    disk_write_bytes_per_sec=2e6,
    net_rx_bytes_per_sec=3e6,
    net_tx_bytes_per_sec=4e6,
)
TRAINING = TrainingSample(
    timestamp=1764400000.0,
    model_name="llama-3-8b",
    model_family="llama",
    framework="pytorch",
    precision="bf16",
    workload_kind="pretraining",
    hostname="node-0",
    global_step=42,
    step_time_ms=1500.0,
    tokens_per_sec=175000.0,
    mfu=0.45,
    world_size=8,
    avg_seq_len=4096.0,
    max_seq_len=4096.0,
    ranks=tuple(
        RankSample(rank=r, gpu_index=r, hostname="node-0", step_time_ms=1400.0 + r, sync_wait_ms=7.0) for r in range(8)
    ),
)


def _live(collected: Collected, ts: float = 100.0):
    latest = LatestSamples()
    latest.put(collected, now=ts)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    register_measurements(provider.get_meter(METER_NAME), latest)
    frame = sdk_frame(reader.get_metrics_data(), ts)
    provider.shutdown()
    return frame


def test_the_sdk_delivers_every_instrument_value_into_the_frame():
    frame = _live(Collected(gpus=GPUS, host=HOST, training=TRAINING))
    assert frame.ts == 100.0
    assert frame.gpus == GPUS
    assert frame.host == HOST
    assert frame.training == TRAINING


def test_what_the_sdk_collects_equals_the_frame_read_back_from_the_samples():
    live = _live(Collected(gpus=GPUS, host=HOST, training=TRAINING))
    assert live == frame_from_samples(100.0, GPUS, HOST, TRAINING)


def test_unknown_throttle_state_stays_unknown():
    gpu = GpuSample(index=0, utilization_percent=50.0)
    frame = _live(Collected(gpus=(gpu,)))
    assert frame.gpus[0].throttle_reasons is None and frame.training is None


def test_diagnosis_outputs_are_not_read_back_as_inputs():
    latest = LatestSamples()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter(METER_NAME)
    register_measurements(meter, latest)
    from opentelemetry.sdk._logs import LoggerProvider

    from trainpulse_otel.publish.otel import DiagnosisPublisher

    DiagnosisPublisher(meter, LoggerProvider().get_logger("t"))
    frame = sdk_frame(reader.get_metrics_data(), 1.0)
    assert frame.gpus == () and frame.host is None and frame.training is None
    provider.shutdown()


def test_observe_scales_clocks_to_hertz_and_emits_all_throttle_reasons():
    points = observe(GPUS[:1])
    assert points["gpu.sm_clock"][0][0] == 1980e6
    reasons = {attrs["reason"]: value for value, attrs in points["gpu.throttle.active"]}
    assert set(reasons) == {"gpu_idle", "sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}
    assert not any(reasons.values())
