"""The composition root: the one place that turns Settings into a running pipeline.

Every entry point goes through here — ``trainpulse daemon``, ``snapshot``,
local ``top``, the in-process :class:`~trainpulse_otel.TrainingMonitor`,
``replay`` and ``eval`` — so collectors, detectors, root-cause rules, adapters
and exporters are chosen and wired in one way only:

- :func:`discover` (the edge: entry points, the autoload switch) finds the parts;
- :func:`build_pipeline` hands the pure judge its detectors and rules;
- :func:`open_engine` builds a live engine: collectors by ``-mode``, the OTel
  instruments over the latest samples, the frame source (the in-process
  reader, or the read-back for a large job view: :class:`LiveFrames`), the
  window, the pipeline, the publisher, the exporters and the trace recorder;
- :func:`open_replay` builds the same step without collectors or OTel, for
  a trace;
- :func:`create_api` builds the HTTP API over an engine, with the adapters;
  :func:`open_otlp_grpc` the OTLP/gRPC receiver beside it, when configured.

No other module constructs an :class:`~.engine.Engine`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..actions import ActionRunner, check_actions
from ..collect.base import Collector
from ..collect.flight_dumps import open_flight_recorder
from ..collect.modes import build_collectors, open_follow, open_scrape
from ..collect.sim.combine import check_scenario
from ..collect.sim.handover import RealReports
from ..collect.sim.placement import node_hostname
from ..collect.trace import TraceWriter
from ..config import ConfigError, Settings
from ..diagnose import DiagnosticPipeline, ThresholdError
from ..publish.life_state import LifeKeeper, LifeStore
from ..publish.otel import DiagnosisPublisher
from ..report.series import RunSeries
from ..telemetry.exporters import build_exports
from ..telemetry.instruments import register_measurements
from ..telemetry.latest import LatestSamples
from ..telemetry.operational import OperationalMetrics
from ..telemetry.providers import build_resource, build_telemetry
from ..telemetry.read_back import ReadBackMemo, frame_from_samples
from ..telemetry.reader import FrameReader
from .engine import Clock, Engine, Outputs, Stepper
from .plugins import Plugins, discover
from .window import Window

if TYPE_CHECKING:
    from flask import Flask

    from ..api.otlp_grpc import OtlpGrpcServer
    from ..samples import Frame

__all__ = [
    "Plugins",
    "build_pipeline",
    "create_api",
    "discover",
    "knob_overrides",
    "open_engine",
    "open_life_keeper",
    "open_otlp_grpc",
    "open_replay",
]


def knob_overrides(plugins: Plugins, thresholds: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """The config's ``detectors`` overrides checked against the knobs found, by detector name; one that fits no
    knob is a ConfigError naming ``detectors.SIGNAL.KNOB``."""
    try:
        return plugins.vocabulary.resolve(thresholds)
    except ThresholdError as exc:
        raise ConfigError(exc.key, exc.message) from None


def build_pipeline(
    plugins: Plugins,
    thresholds: Mapping[str, Any] | None = None,
    words_only: bool = False,
    mtbf_prior_s: float | None = None,
) -> DiagnosticPipeline:
    """A fresh pipeline: new instances of every detector, built with their knobs (``thresholds``: the config's
    ``detectors`` overrides, :func:`knob_overrides`), and every root-cause rule; ``words_only``: it judges a job
    from its own output alone (a log replayed), where measured signals are at most warnings; ``mtbf_prior_s``:
    the config's ``mtbf``, the checkpoint interval's prior until the job's first interruption."""
    overrides = knob_overrides(plugins, thresholds)
    rules = list(plugins.root_causes.values())
    detectors = plugins.new_detectors(overrides)
    return DiagnosticPipeline(detectors, rules, plugins.vocabulary, words_only=words_only, mtbf_prior_s=mtbf_prior_s)


def open_engine(
    settings: Settings,
    *,
    push: bool = False,
    collectors: Sequence[Collector] | None = None,
    extra_collectors: Sequence[Collector] = (),
    mode: str | None = None,
    plugins: Plugins | None = None,
    clock: Clock = time.time,
    actions: bool = False,
) -> Engine:
    """A live engine for ``settings``.

    ``push``: also export OTLP as configured (``otlp`` block, ``OTEL_*``); the
    daemon and the in-process monitor push, ``snapshot`` and ``top`` only
    serve pull endpoints. ``collectors``: instead of those ``-mode`` picks
    (tests, and a ``mode`` name to report with them); ``extra_collectors`` go
    first, beside the mode's (the monitor's own report queue); the log
    follower last, when ``follow`` is set. ``actions``: run the settings' actions on raised signals (the
    daemon's; their signals and causes are checked against the vocabulary whether or not they run).
    """
    plugins = plugins or discover(disabled=settings.disabled_detectors)
    check_scenario(settings.scenario)  # in every mode, as every other setting is checked at start-up
    check_actions(settings.actions, plugins.vocabulary.signal_names, plugins.vocabulary.cause_names)
    reports = RealReports(settings.stale_after)  # ingest stamps it; the simulator yields to it
    if collectors is None:
        mode, collectors = build_collectors(settings, plugins.collectors, reports)
    mode = mode or settings.mode
    exports = build_exports(settings, push=push)
    telemetry = build_telemetry(
        settings.metrics_namespace,
        readers=exports.readers,
        log_processors=exports.log_processors,
        resource=build_resource(resource_attributes(settings, mode)),
    )
    latest = LatestSamples(settings.stale_after, settings.max_ranks, settings.node_series)
    register_measurements(telemetry.meter, latest, settings.metrics_namespace)
    frames = LiveFrames(telemetry.frame_reader, latest)
    pipeline = build_pipeline(plugins, settings.detector_knobs, mtbf_prior_s=settings.mtbf)
    stepper = Stepper(latest, frames, Window(settings.history_size), pipeline)
    stepper.series = RunSeries()  # what GET /v1/report draws: the run since start, bounded
    ops = OperationalMetrics(telemetry.meter, settings.metrics_namespace)
    if settings.follow:  # the job's own logs, read beside any mode's collectors (``-mode none`` too)
        collectors = [*collectors, open_follow(settings, on_read=ops.logs_read)]
    if settings.flight_recorder:  # the job's Flight Recorder dumps, beside any mode's collectors
        collectors = [*collectors, open_flight_recorder(settings.flight_recorder)]
    if settings.scrape:  # dcgm-exporter / node-exporter, beside any mode's collectors: its GPUs win over NVML's
        collectors = [*collectors, open_scrape(settings, on_failure=ops.collector_failed)]
    runner = ActionRunner(settings.actions, ops.action_done, settings.actions_dry_run) if actions else None
    outputs = Outputs(
        telemetry=telemetry,
        exports=exports,
        ops=ops,
        publisher=DiagnosisPublisher(telemetry.meter, telemetry.logger, settings.metrics_namespace, plugins.vocabulary),
        recorder=TraceWriter(settings.record) if settings.record else None,
        actions=runner,
    )
    # only a simulator has a training loop to stand down for real reports
    return Engine(
        settings, mode, [*extra_collectors, *collectors], stepper, outputs, clock, reports if mode == "sim" else None
    )


def resource_attributes(settings: Settings, mode: str) -> dict[str, str]:
    """TrainPulse's resource attributes beyond the defaults: a simulated node of a job across nodes is
    its simulated host (``host.name``), so a job daemon tells the nodes apart; ``OTEL_RESOURCE_ATTRIBUTES``
    still wins (:func:`~trainpulse_otel.telemetry.providers.build_resource`)."""
    if mode == "sim" and settings.sim_nodes > 1:
        return {"host.name": node_hostname(settings.sim_node_rank)}
    return {}


#: Ranks beyond which a live frame is read back from the samples rather than collected through the SDK.
SDK_FRAME_MAX_RANKS = 64


class LiveFrames:
    """A live tick's frame source: the in-process OTel reader, or — for a view of thousands of series — the
    read-back.

    A node daemon's frame (its GPUs, host and ranks) is what its in-process
    :class:`~trainpulse_otel.telemetry.reader.FrameReader` collected from the instruments, so the diagnosis
    reads the numbers Prometheus and OTLP read. A job daemon holding other nodes, or a daemon told of more
    than :data:`SDK_FRAME_MAX_RANKS` ranks, has thousands of series a tick, and the SDK costs ~20 µs a point
    (860 ms a tick for a 64-node job's 512 GPUs and 512 ranks, ~1 s for 4,096 ranks); its frame is then read
    back from the same samples (:class:`SampleFrames`, 3-20 ms), the conversion held equal to the SDK's round
    trip by a property test and a live engine's frame by ``tests/exports/test_operational.py``.
    """

    def __init__(self, reader: FrameReader, latest: LatestSamples) -> None:
        self.reader = reader
        self.latest = latest
        self.read_back = SampleFrames(latest)

    def read(self, ts: float) -> Frame:
        latest = self.latest
        large = latest.holds_nodes() or latest.rank_count() > SDK_FRAME_MAX_RANKS
        return self.read_back.read(ts) if large else self.reader.read(ts)


class SampleFrames:
    """Replay's frame source (and a job daemon's): the latest samples straight to a frame, without the OTel
    round trip. :func:`~trainpulse_otel.telemetry.read_back.frame_from_samples` reads each sample back
    through the catalogue the instruments observe it with, and is held equal to the SDK's samples → points
    → frame round trip by a property test, so replay diagnoses the frames the daemon did."""

    def __init__(self, latest: LatestSamples) -> None:
        self.latest = latest
        self._memo = ReadBackMemo()  # the samples unchanged since the previous frame read back as they did

    def read(self, ts: float) -> Frame:
        latest = self.latest
        current = latest.current()
        return frame_from_samples(
            ts,
            current.gpus or (),
            current.host,
            current.training,
            latest.xid_counts(),
            latest.nodes(),
            self._memo,
            ports=current.ports or (),
        )


def open_replay(settings: Settings, plugins: Plugins | None = None, words_only: bool = False) -> Stepper:
    """The engine's step for a trace: latest samples, frames, window (``history_size``) and pipeline
    (``words_only``: of a job's logs alone, :func:`build_pipeline`)."""
    latest = LatestSamples(stale_after_s=settings.stale_after, max_ranks=settings.max_ranks)
    pipeline = build_pipeline(
        plugins or discover(disabled=settings.disabled_detectors), settings.detector_knobs, words_only, settings.mtbf
    )
    return Stepper(latest, SampleFrames(latest), Window(settings.history_size), pipeline)


def create_api(engine: Engine, settings: Settings, plugins: Plugins) -> Flask:
    """The HTTP API over ``engine``, with the installed adapters and the settings' limits and token."""
    from ..api import create_app

    return create_app(
        engine,
        plugins.adapters,
        max_body_bytes=settings.max_body_bytes,
        max_ranks=settings.max_ranks,
        auth_token=settings.auth_token,
        auth_scope=settings.auth_scope,
    )


def open_life_keeper(engine: Engine, settings: Settings) -> LifeKeeper | None:
    """The job's life kept in ``state_dir`` (None when unset), the saved one already continued in ``engine``'s
    pipeline (:mod:`~trainpulse_otel.publish.life_state`)."""
    if settings.state_dir is None:
        return None
    keeper = LifeKeeper(LifeStore(settings.state_dir, settings.job_id), engine.pipeline)
    keeper.restore()
    return keeper


def open_otlp_grpc(engine: Engine, settings: Settings) -> OtlpGrpcServer | None:
    """The OTLP/gRPC receiver over ``engine`` on ``otlp_grpc_addr`` (None when it is off), not yet started.

    Same decode, token and size limit as ``POST /v1/metrics``; RuntimeError when the address cannot be bound.
    """
    if settings.otlp_grpc_addr is None:
        return None
    from ..api.otlp_grpc import OtlpGrpcServer

    return OtlpGrpcServer(engine, settings.otlp_grpc_addr, settings.auth_token, settings.max_body_bytes)
