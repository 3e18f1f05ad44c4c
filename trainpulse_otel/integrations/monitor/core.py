"""TrainingMonitor: TrainPulse inside a training script.

    monitor = TrainingMonitor(model_name="llama-3-8b", model=model, precision="bf16")
    for batch in monitor.wrap_dataloader(loader):
        with monitor.step(tokens=batch["input_ids"].numel()):
            loss = train_step(batch)
    monitor.close()

The training thread only touches :class:`~.recorder.StepRecorder` (a few
hundred nanoseconds a step). A background thread drains it once per
``interval`` into one training report for the destination: the in-process
pipeline (``endpoint=None``) or a daemon over REST. Every rank also sends its
heartbeat (:mod:`.heartbeat`) from a thread of its own, so a rank blocked
inside a collective still says where it is — a DDP ``model`` has its
all-reduce marked as such by itself (:mod:`.commhook`), and a rank that stays
put sends its stack (:mod:`.stack`). Configuration errors
raise here, at construction; once running, nothing raises into the loop.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from time import monotonic
from typing import Any

from ...collect.gpu_name import detect_gpu_name
from ...mfu import ModelShape, model_shape, normalize_dtype, positive_flops, resolve_peak_flops
from ...samples import TRAINING_RULES, RankSample, SampleError, TrainingSample, check_value, merged_rank, parse_rank
from .aggregate import IntervalNumerics, JobContext, aggregate, build_sample
from .commhook import AllReduceMarker, ddp_all_reduce_marked
from .destinations import Destination, InProcess, Rest, Silent
from .distributed import DEFAULT_GATHER_EVERY, RankGatherer, World, detect_world
from .heartbeat import DEFAULT_PERIOD_S, MAX_PERIOD_S, HeartbeatThread, RankState, StoreChannel, rest_send
from .recorder import DEFAULT_BUFFER_STEPS, PhaseTimer, StepRecorder, StepTimer, TimedIterable

log = logging.getLogger(__name__)

ENDPOINT_ENV = "TRAINPULSE_ENDPOINT"
TOKEN_ENV = "TRAINPULSE_AUTH_TOKEN"  # noqa: S105 - the variable's name, not a token
PEAK_FLOPS_ENV = "TRAINPULSE_PEAK_FLOPS"
HARDWARE_MODES = ("auto", "nvml", "nvidia-smi", "host", "none")


class TrainingMonitor:
    """Times steps, data waits and phases; reports them to TrainPulse in the background.

    ``endpoint`` (or ``TRAINPULSE_ENDPOINT``) sends to a daemon; without one the
    monitor runs its own pipeline and :meth:`diagnosis` answers in-process.
    ``model`` (a ``torch.nn.Module``) or ``flops_per_token`` gives MFU; a
    ``DistributedDataParallel`` model also has its gradient all-reduce marked
    as the heartbeat's ``all_reduce`` phase (a DDP communication hook; not
    with ``mark_all_reduce=False``);
    ``peak_flops`` (or ``TRAINPULSE_PEAK_FLOPS``) overrides the GPU table.
    ``job_fields`` are contract training fields (``precision``,
    ``global_batch_size``, ``world_size`` …) sent with every report.
    ``heartbeat_s`` (at most 5 s) is how often each rank sends its heartbeat;
    ``heartbeat_store`` a ``torch.distributed.Store`` for them in in-process
    mode (default: the rendezvous store at ``MASTER_ADDR:MASTER_PORT``).
    ``record`` (in-process mode only) writes the pipeline's trace to that JSONL
    file, as ``trainpulse daemon -record`` does; ``trainpulse replay`` reads it.
    """

    def __init__(
        self,
        model_name: str | None = None,
        framework: str = "pytorch",
        endpoint: str | None = None,
        interval: float = 1.0,
        *,
        model: Any = None,
        flops_per_token: float | None = None,
        seq_len: float | None = None,
        causal: bool = False,
        peak_flops: float | None = None,
        gpu_name: str | None = None,
        auth_token: str | None = None,
        hardware: str = "auto",
        gather_every: int = DEFAULT_GATHER_EVERY,
        buffer_steps: int = DEFAULT_BUFFER_STEPS,
        queue_size: int = 64,
        timeout_s: float = 2.0,
        heartbeat_s: float = DEFAULT_PERIOD_S,
        heartbeat_store: Any = None,
        record: str | os.PathLike[str] | None = None,
        mark_all_reduce: bool = True,
        **job_fields: Any,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        if hardware not in HARDWARE_MODES:
            raise ValueError(f"hardware must be one of {', '.join(HARDWARE_MODES)}, got {hardware!r}")
        self.world = detect_world()
        fields = _job_fields({"model_name": model_name, "framework": framework, **job_fields})
        self.job = _job_context(fields, self.world, model, flops_per_token, seq_len, causal, peak_flops, gpu_name)
        self._recorder = StepRecorder(buffer_steps, keep=self.world.is_reporter)
        self._gatherer = self._start_gatherer(gather_every)
        self._seen_ranks: tuple[RankSample, ...] = ()
        self._invalid_fields = 0
        self._drain_lock = threading.Lock()
        self._open_step: StepTimer | None = None
        endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
        if record is not None and endpoint:
            raise ValueError(
                f"record= writes the in-process pipeline's trace; with an endpoint ({endpoint}) the daemon "
                "records it (trainpulse daemon -record FILE)"
            )
        self.endpoint = endpoint
        self._state = RankState(self._recorder, self.world)  # this thread is the training thread
        self._all_reduce: AllReduceMarker | None = (
            ddp_all_reduce_marked(model, self._recorder) if mark_all_reduce else None
        )
        in_process = self.world.dist is not None and not endpoint
        self._store = StoreChannel(self.world, heartbeat_store) if in_process else None
        token = auth_token or os.environ.get(TOKEN_ENV)
        # set before the destination opens: an in-process destination's tick thread drains at once
        self._beat_every_s = min(MAX_PERIOD_S, heartbeat_s)
        self._beats: tuple[RankSample, ...] = ()  # the heartbeats last handed to the in-process pipeline
        self._beats_at = float("-inf")
        self._destination: Destination = self._open_destination(
            endpoint, interval, token, hardware, queue_size, timeout_s, None if record is None else os.fspath(record)
        )
        self._own_sender: Any = None  # a non-reporting rank's RestSender, for its heartbeats only
        self._heartbeat = self._start_heartbeat(endpoint, token, heartbeat_s, timeout_s)
        self._closed = False

    # -------------------------------------------------------------- hot path

    def step(
        self, tokens: Any = None, samples: Any = None, seq_lens: Any = None, padded_len: Any = None, loss: Any = None
    ) -> StepTimer:
        """``with monitor.step(...):`` times one optimizer step.

        ``tokens``/``samples``: this rank's tokens and samples in the step;
        ``seq_lens``: real (unpadded) lengths of its sequences, a list or a
        tensor (read off the training thread); ``padded_len``: the length they
        were padded to (default: the longest); ``loss``: the step's loss (a
        float or a 0-d tensor; NaN and inf are reported as such). Any may be
        set on the returned object inside the block (``s.loss = loss``).
        """
        return StepTimer(self._recorder, tokens, samples, seq_lens, padded_len, loss)

    def phase(self, name: str) -> PhaseTimer | Any:
        """``with monitor.phase("data"|"tokenizer"|"checkpoint"|"all_reduce"|"sync"):``.

        The time counts toward the open step, or — outside a step — toward the
        next step to finish (and into its iteration time).
        """
        return self._recorder.phase(name)  # the same timer object for every call with one name

    def wrap_dataloader(self, iterable: Iterable[Any]) -> TimedIterable:
        """The same batches, with the wait for each timed as the next step's data wait."""
        return self._recorder.wrap(iterable)

    def begin_step(self) -> None:
        """Start timing a step, for callback-driven loops (Trainer callbacks); see :meth:`end_step`."""
        self._open_step = self.step()
        self._open_step.__enter__()

    def end_step(self, tokens: Any = None, samples: Any = None, seq_lens: Any = None, padded_len: Any = None) -> None:
        """Finish the step :meth:`begin_step` started, with the same fields as :meth:`step`."""
        timer, self._open_step = self._open_step, None
        if timer is None:
            return
        timer.tokens, timer.samples, timer.seq_lens, timer.padded_len = tokens, samples, seq_lens, padded_len
        timer.__exit__(None, None, None)

    def checkpoint_loaded(self, step: int, seconds: float | None = None) -> None:
        """The job resumed from the checkpoint of ``step``: steps counted from here go on from it (the next is
        ``step + 1``); ``seconds``: the load's time, where not timed with ``monitor.phase("checkpoint_load")``."""
        self._invalid_fields += not self._recorder.resumed(step, seconds)

    def add_phase_time(self, name: str, seconds: float) -> None:
        """Attribute time measured elsewhere (``"data"``, ``"checkpoint"``, …) as in :meth:`phase`."""
        self._recorder.add_phase_time(name, seconds)

    def record(self, **fields: Any) -> None:
        """Record contract training fields (``loss=…``, ``mfu=…``); they win over measured ones."""
        self._recorder.record(fields)

    # ------------------------------------------------------- non-hot-path API

    def diagnosis(self) -> dict[str, Any] | None:
        """The current diagnosis (in-process), the daemon's (REST), or None (ranks other than 0)."""
        return self._destination.diagnosis()

    def flush(self) -> None:
        """Report what is buffered now (in-process: one tick of the pipeline)."""
        self._destination.flush()

    @property
    def stats(self) -> dict[str, int]:
        """Steps recorded and dropped, invalid fields, faults, gathers, and the destination's counts."""
        out = {
            "steps": self._recorder.steps,
            "dropped_steps": self._recorder.dropped_steps,
            "invalid_fields": self._invalid_fields,
            "faults": self._recorder.faults,
        }
        if self._gatherer is not None:
            out["gathers"] = self._gatherer.gathers
        if self._heartbeat is not None:
            out["heartbeats_sent"] = self._heartbeat.sent
        if self._store is not None and self.world.is_reporter:
            out["heartbeats_received"] = sum(self._store.received.values())
        out.update(self._destination.stats())
        return out

    def close(self) -> None:
        """Report the last interval, flush exporters or the sender, stop the threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._state.closed = True
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self._own_sender is not None:
            self._own_sender.close()
        self._destination.close()

    def __enter__(self) -> TrainingMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ drain

    def drain(self) -> TrainingSample | None:
        """One report for everything buffered since the last drain (background thread)."""
        with self._drain_lock:
            return self._drain()

    def _drain(self) -> TrainingSample | None:
        records, given_list = self._recorder.take()
        given = self._valid_given(given_list)
        if "global_step" in given:
            self._recorder.step_base = given["global_step"] - self._recorder.steps
        used = frozenset(i for i, flag in enumerate(self._recorder.used_phases) if flag)
        step = self._recorder.step_base + self._recorder.steps
        fields = aggregate(records, self.job, used, step, self._new_ranks())
        return build_sample(fields, self.job, given)

    def drain_with_heartbeats(self) -> TrainingSample | None:
        """In-process, each tick: :meth:`drain`'s report with this rank's heartbeat and the others' from the
        store, merged per rank. Without a report, the heartbeats alone — when they changed, or once per
        heartbeat period to keep the ranks alive — so a blocked job still has them and an idle tick stays free."""
        sample = self.drain()
        beats = tuple(
            sorted((self._state.beat(), *(self._store.read() if self._store is not None else ())), key=lambda r: r.rank)
        )
        now = monotonic()
        if sample is None:
            if beats == self._beats and now - self._beats_at < self._beat_every_s:
                return None
            self._beats, self._beats_at = beats, now
            return TrainingSample(ranks=beats)
        self._beats, self._beats_at = beats, now
        ranks = {r.rank: r for r in beats}
        for r in sample.ranks:
            ranks[r.rank] = merged_rank(ranks[r.rank], r) if r.rank in ranks else r
        return replace(sample, ranks=tuple(ranks[r] for r in sorted(ranks)))

    def _new_ranks(self) -> tuple[RankSample, ...]:
        latest = self._gatherer.latest if self._gatherer is not None else ()
        if latest is self._seen_ranks:
            return ()
        self._seen_ranks = latest
        return latest

    def _valid_given(self, given_list: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        numerics = IntervalNumerics()
        for given in given_list:
            for name, value in given.items():
                try:
                    out[name] = numerics.add(name, _checked(name, value))
                except (SampleError, TypeError) as exc:
                    self._invalid_fields += 1
                    self._recorder.log_once(f"field:{name}", "record(): %s; dropped", exc)
        out.update(numerics.fields())
        return out

    # ------------------------------------------------------------------ setup

    def _start_gatherer(self, every: int) -> RankGatherer | None:
        if self.world.dist is None or every <= 0:
            return None
        gatherer = RankGatherer(self.world, every)
        self._recorder.step_hook = gatherer.on_step
        return gatherer

    def _start_heartbeat(
        self, endpoint: str | None, token: str | None, period_s: float, timeout_s: float
    ) -> HeartbeatThread | None:
        """REST: every rank posts its heartbeat; in-process: ranks other than 0 write theirs to the store
        (rank 0's pipeline reads its own with theirs on each tick)."""
        if endpoint:
            sender = self._destination.sender if isinstance(self._destination, Rest) else None
            if sender is None:
                from .sender import RestSender

                sender = self._own_sender = RestSender(endpoint, token, queue_size=4, timeout_s=timeout_s)
            return HeartbeatThread(self._state, rest_send(sender), period_s)
        if self._store is not None and not self.world.is_reporter:
            return HeartbeatThread(self._state, self._store.put, period_s)
        return None

    def _open_destination(
        self,
        endpoint: str | None,
        interval: float,
        token: str | None,
        hardware: str,
        queue_size: int,
        timeout_s: float,
        record: str | None,
    ) -> Destination:
        if not self.world.is_reporter:
            return Silent()  # its numbers reach rank 0's report (and trace) through the gather
        if endpoint:
            return Rest(self.drain, interval, endpoint, token, queue_size=queue_size, timeout_s=timeout_s)
        return InProcess(self.drain_with_heartbeats, interval, hardware, record)


def _checked(name: str, value: Any) -> Any:
    if name == "ranks":
        if not isinstance(value, (list, tuple)):
            raise SampleError("ranks", "must be a list of rank objects")
        return tuple(r if isinstance(r, RankSample) else parse_rank(r, f"ranks[{i}]") for i, r in enumerate(value))
    rule = TRAINING_RULES.get(name)
    if rule is None:
        raise SampleError(name, "is not a training field")
    if hasattr(value, "item"):  # a 0-d tensor or numpy scalar
        value = value.item()
    return check_value(name, value, rule)


def _job_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the constructor's job fields; unknown names and bad values raise here."""
    fields = {"hostname": socket.gethostname()}
    for name, value in raw.items():
        if value is None:
            continue
        if name not in TRAINING_RULES or name == "ranks":
            raise TypeError(f"TrainingMonitor() got an unexpected keyword argument {name!r}")
        fields[name] = check_value(name, value, TRAINING_RULES[name])
    return fields


def _job_context(
    fields: dict[str, Any],
    world: World,
    model: Any,
    flops_per_token: float | None,
    seq_len: float | None,
    causal: bool,
    peak: float | None,
    gpu_name: str | None,
) -> JobContext:
    world_size = fields.get("world_size") or world.world_size
    parallel = (fields.get("tensor_parallel_size") or 1) * (fields.get("pipeline_parallel_size") or 1)
    data_parallel = fields.get("data_parallel_size") or max(1, world_size // parallel)
    shape: ModelShape | None = None
    if flops_per_token is None and model is not None:
        shape = model_shape(model)
    dtype = normalize_dtype(fields.get("precision", "bf16")) or "bf16"
    if peak is None:
        peak = peak_from_env(os.environ)
    if peak is None and gpu_name is None:
        gpu_name = detect_gpu_name(world.local_rank)
    return JobContext(
        fields=fields,
        world_size=world_size,
        data_parallel_size=data_parallel,
        shape=shape,
        flops_per_token=flops_per_token,
        seq_len=seq_len,
        causal=causal,
        peak_flops=resolve_peak_flops(gpu_name, dtype, peak),
    )


def peak_from_env(environ: Mapping[str, str]) -> float | None:
    """``TRAINPULSE_PEAK_FLOPS`` (FLOP/s per device), or None when unset or unusable (then logged)."""
    text = environ.get(PEAK_FLOPS_ENV)
    if not text:
        return None
    try:
        return positive_flops(float(text), PEAK_FLOPS_ENV)
    except ValueError as exc:
        log.warning("ignoring %s: %s", PEAK_FLOPS_ENV, exc)
        return None
