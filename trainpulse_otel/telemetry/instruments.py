"""Register the catalogue's measurements as observable OTel instruments.

Each instrument's callback reads the points :class:`LatestSamples` derived from
the newest samples, so collection costs nothing between reads and every reader
(the diagnostic reader, Prometheus, OTLP) sees the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from .catalog import ALL_INPUTS, MetricSpec
from .latest import LatestSamples

METER_NAME = "trainpulse_otel"
#: Series per instrument a reader keeps (the SDK default of 2,000 would fold ranks and a job's GPUs away).
DEFAULT_MAX_SERIES = 65_536
DEFAULT_NAMESPACE = "trainpulse"


def instrument_name(namespace: str, suffix: str) -> str:
    """The OTel instrument name for a catalogue suffix (``trainpulse.gpu.utilization``)."""
    return f"{namespace}.{suffix}"


def register_measurements(meter: Meter, latest: LatestSamples, namespace: str = DEFAULT_NAMESPACE) -> None:
    """Create one observable instrument per catalogue entry, reading ``latest``."""
    for spec in ALL_INPUTS:
        create = meter.create_observable_counter if spec.monotonic else meter.create_observable_gauge
        create(
            instrument_name(namespace, spec.suffix),
            callbacks=[_callback(latest, spec)],
            unit=spec.unit,
            description=spec.description,
        )


def _callback(latest: LatestSamples, spec: MetricSpec) -> Callable[[CallbackOptions], Iterable[Observation]]:
    suffix = spec.suffix

    def read(_options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, attrs) for value, attrs in latest.observations()[suffix]]

    return read
