"""The simulated node: GPUs, host and training loop of one node, sampled at seconds since start.

:class:`SimulatedNode` composes the parts — the GPU model (:mod:`.gpus`), the
host (:mod:`.host`), the step and its report (:mod:`.training`) — over one
seeded random stream, and applies the scenario's knobs (:mod:`.knobs`) each
tick. It is pure: the same seed, scenario and sequence of ``t`` give the same
samples, with no clock and no I/O.

Cadence: each ``sample(t)`` returns GPUs and host as seen at ``t``, and one
training report describing the step that just finished. While a checkpoint
save blocks training, and after the job has been killed (the OOM scenarios),
no step finishes, so ``training`` is None; the step that ends a save reports
the save's length in ``checkpoint_ms``. While a rank is hung (the ``rank_hang``
knob) no step finishes either: its GPU idles, the others spin inside the
all-reduce, and ``training`` carries only the ranks' heartbeats (None for a job
without them); the step that finally completes includes the hang in its time. A
rank that dies (:mod:`.crashes`) ends the job or leaves the others waiting, as
its launcher does; ``events`` carries what the job printed (:mod:`.console`),
for a job whose output is read. ``global_step`` advances with the simulated wall
time, so with steps longer than the interval two reports may carry the same step number. A job its launcher
restarts (``JobConfig.restart_after_s``) goes on that long after it went down, from the steps of the last
checkpoint saved; ``attempts`` keeps each attempt's reported steps and times, what the evaluation scores the
job's life against.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from ...samples import LogEvent
from ..base import Collected
from .combine import scenario_named
from .console import Console
from .crashes import AGENT_NOTICE_S, Crashes
from .faults import HardwareFaults, spinning_gpus
from .gpus import Heat, busy_gpus, governed_clock, hung_gpus, idle_gpus, new_gpu
from .host import HOST_CPU_PERCENT, SAVE_CPU_PERCENT, HostModel
from .job import NODE_GPUS, RANK_SPREAD, JobConfig, JobShape
from .knobs import Knobs
from .peers import job_view
from .physics import GPU_MEMORY_BYTES, GPU_RESERVED_BYTES, THERMAL_TAU_S, approach
from .placement import Placement
from .scenarios import Scenario
from .training import Checkpointing, LossState, RankNames, Reporter, Step, StepModel

#: torchrun's ``--max-restarts`` for a job that restarts (``JobConfig.restart_after_s``).
RESTARTS = 3
#: How long before the restarted job's first report its load's line is printed (a step's time, within a tick).
LOAD_LINE_BEFORE_S = 0.5


class SimulatedNode:
    """A deterministic model of one training node; ``sample(t)`` gives what it shows at ``t``."""

    def __init__(
        self,
        scenario: str | Scenario = "healthy",
        seed: int = 0,
        gpus: int = NODE_GPUS,
        ranks: int | None = None,
        interval_s: float = 1.0,
        start_ts: float = 1764400000.0,
        hostname: str | None = None,
        *,
        nodes: int = 1,
        node_rank: int = 0,
        fault_node: int | None = None,
    ) -> None:
        self.scenario = scenario_named(scenario) if isinstance(scenario, str) else scenario
        self.job = replace(JobConfig(), **self.scenario.job)
        self.placement = placement = Placement(gpus, nodes, node_rank, fault_node)
        self.gpus = gpus
        self.ranks = placement.job_ranks(_job_ranks(self.job, gpus, ranks, placement.nodes))
        self.interval_s = interval_s
        self.start_ts = start_ts
        self.hostname = hostname = hostname or placement.hostname
        self.shape = JobShape.of(self.job, self.ranks, gpus)
        self._rng = rng = random.Random(placement.seed(seed))
        self._gpu = [new_gpu(rng, i) for i in range(gpus)]
        self._healthy = Knobs.healthy([g.mem_frac for g in self._gpu])
        rank_speed = [math.exp(rng.gauss(0.0, RANK_SPREAD)) for _ in range(self.ranks)]
        self._phase = rng.uniform(0.0, 2 * math.pi)
        self._host = HostModel(rng, self._phase, self.shape)
        self._step = StepModel(rng, self.shape, rank_speed)
        names = self._rank_names(hostname)
        self._reporter = Reporter(rng, self.job, self.shape, hostname, names)
        console = Console(self.job, hostname, names.rank, gpus) if self.job.logs else None
        self._crashes = Crashes(self.job, console, gpus, GPU_MEMORY_BYTES - GPU_RESERVED_BYTES)
        self._checkpoint = Checkpointing()
        self._t: float | None = None
        self._settle = True
        self._steps = 0.0
        self._crashed = False
        self._faults = HardwareFaults(gpus)
        self._elsewhere: dict[int, float] = {}  # this tick's slow ranks on another node's faulted GPUs
        #: The fault node's own simulation, run beside this one for its ranks' slowdowns (``fault_node``).
        self._fault_node = None if placement.faults_here else self._shadow(seed, gpus, ranks, interval_s, start_ts)
        self._last_step: Step | None = None
        self._hung_since: float | None = None  # when the current hang began (seconds since start)
        self._hung_s = 0.0  # how long the step in progress has been hung
        self._stalled_since: float | None = None  # when a GPU fell off the bus (seconds since start)
        self._down_at: float | None = None  # when the launcher ended the job, to restart it (seconds since start)
        self._saved_steps = 0.0  # the steps done when the last checkpoint was saved
        self._restart_told = False  # the agent said it restarts the workers (this time down)
        #: Each attempt's reports: (global_step, unix time); a new list when the launcher restarts the job.
        self.attempts: list[list[tuple[int, float]]] = [[]]

    def _shadow(self, seed: int, gpus: int, ranks: int | None, interval_s: float, start_ts: float) -> SimulatedNode:
        """The fault node's simulation: the same scenario, seed and job as that node's own daemon runs."""
        fault = self.placement.fault_node
        return SimulatedNode(self.scenario, seed, gpus, ranks, interval_s, start_ts, nodes=self.placement.nodes,
                             node_rank=fault, fault_node=fault)  # fmt: skip

    @property
    def slowdowns(self) -> tuple[float, ...]:
        """The last step's slowdown of each of this node's own ranks (see :class:`.training.StepModel`)."""
        return self._step.slowdowns

    def _rank_names(self, hostname: str) -> RankNames:
        """The job's number and host of every internal rank, and which of them this node reports."""
        placement, n = self.placement, self.ranks
        return RankNames(
            [placement.global_rank(r, n) for r in range(n)],
            [placement.host_of(r, n, hostname) for r in range(n)],
            placement.reported(n),
        )

    def sample(self, t: float) -> Collected:
        """What the node shows ``t`` seconds after start (call with increasing ``t``)."""
        self._settle = self._t is None  # start at equilibrium: the job has been running a while
        dt = self.interval_s if self._settle else max(0.0, t - self._t)
        self._t = t
        if self._fault_node is not None:
            self._fault_node.sample(t)
        k = self._own_knobs(self._healthy.at(self.scenario, t))
        lost = self._faults.any_lost(k) and not self._crashed
        collected = self._stalled(t, dt, k) if lost else self._sample(t, dt, k)
        faulted = replace(collected, gpus=self._faults.apply(collected.gpus or (), k, dt))
        if not self.job.peer_nodes:
            return faulted
        # the other nodes' GPUs are this node's before its hardware faults: a GPU that falls off the bus, its
        # XIDs and ECC errors are this node's own, not every node's
        peers = job_view(collected, self.job.peer_nodes, self.job.lost_peer if k.peer_lost >= 0.5 else None)
        return replace(peers, gpus=faulted.gpus)

    def _own_knobs(self, k: Knobs) -> Knobs:
        """The knobs of this node's GPUs; a fault on another node's GPUs (``fault_node``) leaves them healthy and
        slows the ranks there as that node's own simulation does (its straggler, a throttled GPU's clock, its
        allocator's retries; against its median rank, so what slows every rank alike — a power cap — is not a
        straggler's), which this node's ranks then wait for."""
        if self._fault_node is None:
            return k
        slowdowns = self._fault_node.slowdowns
        if slowdowns:
            typical = sorted(slowdowns)[len(slowdowns) // 2]
            ranks = self.placement.fault_ranks()
            self._elsewhere = {ranks[g]: s / typical for g, s in enumerate(slowdowns) if s > typical}
        return k.job_wide(self._healthy)

    def _sample(self, t: float, dt: float, k: Knobs) -> Collected:
        now = self.start_ts + t
        printed = self._crashes.reports(now) if self._crashed else self._crashes.tick(now, k)
        if self._crashes.job_down or k.host_memory_leak >= 1.0:
            self._crashed = True  # the OOM killer, or a dead rank (a CUDA OOM, an exception) tearing the job down
        relaunched = self._relaunch(t) if self._crashed else []
        if self._crashed:
            return _printing(self._idle(t, dt, k, saving=False), printed + relaunched)
        hung, gone = k.hung(), tuple(self._crashes.dead)  # stuck ranks; dead ones the others wait for (srun)
        if (hung or gone or k.links_down() or k.peer_lost >= 0.5) and self._last_step is not None:
            return _printing(self._stuck(t, dt, k, hung, self._last_step, gone), printed)
        self._hung_since = None
        if self._checkpoint.saving(dt):
            return self._idle(t, dt, k, saving=True)
        checkpoint_ms = self._checkpoint.finished_ms()
        if checkpoint_ms:
            self._saved_steps = self._steps  # a save that finished: what a restart resumes from
        if not checkpoint_ms and self._checkpoint.due(dt, k.checkpoint_every_s):
            self._checkpoint.start(k.checkpoint_save_s * (0.75 + 0.5 * self._rng.random()))
        return _printing(self._train(t, dt, k, checkpoint_ms), relaunched)  # a restart's load, as the job resumes

    def _train(self, t: float, dt: float, k: Knobs, checkpoint_ms: float) -> Collected:
        """A tick on which a step finished: time it, then show it on GPUs, host and the report."""
        intensity = 0.3 + 0.7 * k.flop_efficiency  # tensor-core share of the work: drives power
        clocks, reasons = zip(*(governed_clock(g, k.power_cap_w, intensity) for g in self._gpu), strict=True)
        step = self._step.time(k, clocks, self._elsewhere)
        self._steps += dt * 1000.0 / step.wall_ms
        gpus = busy_gpus(self._rng, self._gpu, step, k, clocks, reasons, intensity, self._heat(dt))
        cpu = HOST_CPU_PERCENT + k.host_cpu_percent
        host = self._host.sample(t, dt, cpu, k.host_memory_leak, 0.0, step.wall_ms, self._settle)
        global_step = self.job.first_step + int(self._steps)
        loss = LossState(k.loss_factor * (1.0 + 2.0 * k.divergence), k.divergence >= 1.0)
        stalled_ms, self._hung_s, self._last_step = self._hung_s * 1000.0, 0.0, step
        training = self._reporter.report(self.start_ts + t, global_step, step, checkpoint_ms, loss, stalled_ms)
        self.attempts[-1].append((global_step, self.start_ts + t))
        return Collected(gpus=gpus, host=host, training=training)

    def _relaunch(self, t: float) -> list[LogEvent]:
        """The launcher's part once it has ended the job: its restart line as it notices, and — ``restart_after_s``
        later — the job started again from its last checkpoint, the load's line as it ends (none without one)."""
        after, console = self.job.restart_after_s, self._crashes.console
        if after is None or not self._crashes.job_down:
            return []
        now = self.start_ts + t
        if self._down_at is None:
            self._down_at = t
        if len(self.attempts) > RESTARTS:
            return []
        if t - self._down_at < after:  # the agent says so after its report of the dead worker
            told = t - self._down_at >= AGENT_NOTICE_S and not self._restart_told
            self._restart_told |= told
            left = RESTARTS - len(self.attempts) + 1
            return [console.restarting(now, left, RESTARTS)] if told and console is not None else []
        spent = self._crashes.spent | frozenset(self._crashes.dead)
        self._crashes = Crashes(self.job, console, self.gpus, self._crashes.capacity)
        self._crashes.spent = spent
        self._crashed, self._down_at, self._last_step, self._hung_s = False, None, None, 0.0
        self._restart_told = False
        self._steps, self._checkpoint = self._saved_steps, Checkpointing()
        self.attempts.append([])
        load = self.job.checkpoint_load_s  # its line, before the first step of the new attempt ends
        return [] if console is None or load <= 0 else [console.checkpoint_loaded(now - LOAD_LINE_BEFORE_S, load)]

    def _stuck(
        self, t: float, dt: float, k: Knobs, hung: tuple[int, ...], last: Step, gone: tuple[int, ...] = ()
    ) -> Collected:
        """A tick with the ranks of ``hung`` stuck before the all-reduce (or ``gone``: dead) and the others
        waiting inside it: no step, only heartbeats, and the waiting ranks' watchdogs."""
        if self._hung_since is None:
            self._hung_since = t
        self._hung_s += dt
        gpus = hung_gpus(self._rng, self._gpu, k, hung + gone, self._heat(dt), released=gone)
        cpu = HOST_CPU_PERCENT + k.host_cpu_percent
        host = self._host.sample(t, dt, cpu, k.host_memory_leak, 0.0, None, self._settle)
        global_step = self.job.first_step + int(self._steps)
        start, since = self.start_ts, self.start_ts + self._hung_since
        training = self._reporter.stuck(start + t, global_step, hung, since, last, gone)
        waiting = [r for r in range(self.gpus) if r not in hung and r not in gone]
        printed = self._crashes.watchdog(start + t, since, last.compute, waiting, global_step)
        return _printing(Collected(gpus=gpus, host=host, training=training), printed)

    def _idle(self, t: float, dt: float, k: Knobs, saving: bool) -> Collected:
        """A tick with no step: a checkpoint save blocks training, or the job is dead."""
        gpus = idle_gpus(self._rng, self._gpu, k, saving, self._heat(dt))
        if saving:
            write = self.shape.checkpoint_bytes / max(self._checkpoint.save_s, 1e-3)
            cpu = HOST_CPU_PERCENT + SAVE_CPU_PERCENT + k.host_cpu_percent
            host = self._host.sample(t, dt, cpu, k.host_memory_leak, write, None, self._settle)
        else:
            host = self._host.sample(t, dt, 1.0, None, 0.0, None, self._settle)
        return Collected(gpus=gpus, host=host, training=None)

    def _stalled(self, t: float, dt: float, k: Knobs) -> Collected:
        """A GPU is off the bus: its rank cannot step, the others spin in the all-reduce; no step finishes."""
        gpus = spinning_gpus(self._rng, idle_gpus(self._rng, self._gpu, k, True, self._heat(dt)))
        host = self._host.sample(t, dt, HOST_CPU_PERCENT, k.host_memory_leak, 0.0, None, self._settle)
        collected = Collected(gpus=gpus, host=host, training=None)
        if self._last_step is None:
            return collected
        if self._stalled_since is None:
            self._stalled_since = t
        now, since = self.start_ts + t, self.start_ts + self._stalled_since
        waiting = [r for r in range(self.gpus) if k.gpu_lost[r] < 0.5 and r not in self._crashes.dead]
        step = self.job.first_step + int(self._steps)
        printed = self._crashes.watchdog(now, since, self._last_step.compute, waiting, step) + self._crashes.reports(
            now
        )
        self._crashed = self._crashes.job_down  # a watchdog's teardown ended the job
        return _printing(collected, printed)

    def _heat(self, dt: float) -> Heat:
        """This tick's inlet drift (+-1.2 C over ~30 min) and how far temperatures move toward target."""
        drift = 1.2 * math.sin(2 * math.pi * (self._t or 0.0) / 1800.0 + self._phase)
        return Heat(drift, approach(dt, THERMAL_TAU_S, self._settle), self._settle)


def _printing(collected: Collected, printed: list[LogEvent]) -> Collected:
    """``collected`` with the lines the job printed this tick (none: as it was)."""
    return replace(collected, events=tuple(printed)) if printed else collected


def _job_ranks(job: JobConfig, gpus: int, ranks: int | None, nodes: int) -> int | None:
    """The ranks to simulate when not given: every rank of a job whose other nodes this daemon hears
    (``peer_nodes``), or of a job across ``JobConfig.nodes`` (on a one-node placement)."""
    if ranks is not None:
        return ranks
    if job.peer_nodes:
        return gpus * (job.peer_nodes + 1)
    return gpus * job.nodes if job.nodes > 1 and nodes == 1 else None
