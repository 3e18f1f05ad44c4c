"""Ranks that die, and what the job prints as they do: the simulated job's failures, tick by tick.

A rank's process dies of an exception (the ``rank_exit`` knob), of CUDA running out of memory (its GPU's
memory full), of the OOM killer (the host's), or of its own NCCL error once its InfiniBand link has failed
(``link_error``: the completion error ~8.6 s later, then the process group's teardown). While ranks wait in
a collective that cannot finish, each one's NCCL watchdog gives up ``collective_timeout_s`` after it entered
it, and — with the teardown — takes its process down too. What follows a death is the launcher's:
``torchrun``'s agent stops the node's other workers and reports the first (the job is down); under ``srun``
the other tasks live on and wait for the dead one at the next collective.

The lines are printed only when the daemon reads the job's output (``JobConfig.logs``): :mod:`.console`.
The watchdog is modelled only then too: a run whose output is not simulated (every scenario before
these lines were) keeps a hang for as long as its knob says. Pure: no clock, no randomness.
"""

from __future__ import annotations

import math

from ...samples import LogEvent
from .console import BUCKET_ELEMENTS, SETUP_COLLECTIVES, WATCHDOG_POLL_S, Console
from .job import IB_GIVE_UP_S, JobConfig
from .knobs import Knobs

#: Exit codes as torchrun reports them: an exception's ``sys.exit(1)``, or minus the signal that killed it.
EXCEPTION_EXIT = 1
SIGNALS = {-6: "SIGABRT", -9: "SIGKILL"}
#: What a rank's data loader raises when one of its worker processes dies (here: a bus error on full /dev/shm).
LOADER_ERROR = ("RuntimeError", "DataLoader worker (pid(s) {pid}) exited unexpectedly")
#: The pid of global rank r's first data-loader worker is this plus r (workers start after every rank has).
LOADER_PID_BASE = 52118
#: From a worker's death to its agent's report: torchrun polls its workers every 0.1 s, then stops the others.
AGENT_NOTICE_S = 0.3
#: From NCCL's error to the process's end: the process group's watchdog polls every 0.1 s, then aborts.
TEARDOWN_S = 0.2


class Crashes:
    """Each local rank's death, the job's fate, and the lines printed on the way (``console``: None when the
    daemon does not read the job's output)."""

    def __init__(self, job: JobConfig, console: Console | None, gpus: int, capacity: float) -> None:
        self.job = job
        self.console = console
        self.gpus = gpus
        self.capacity = capacity  # a GPU's memory as CUDA counts it (what the CUDA OOM message says)
        self.dead: dict[int, int] = {}  # local rank -> its exit code
        self.job_down = False  # the launcher ended every rank on the node
        self._link_down: dict[int, float] = {}  # local GPU -> when its NIC failed (unix seconds)
        self._told: set[tuple] = set()
        self._pending: list[tuple[float, int, int]] = []  # agent reports due: (when, local rank, exit code)
        self.spent: frozenset[int] = frozenset()  # ranks whose exception killed an earlier attempt: not again

    def tick(self, now: float, k: Knobs) -> list[LogEvent]:
        """The deaths the knobs bring at ``now`` (unix seconds), and what is printed by then."""
        out: list[LogEvent] = []
        for g in k.exited():
            if g not in self.dead and g not in self.spent:
                out += self._exception(now, g)
                self._die(g, EXCEPTION_EXIT, now)
        for g, frac in enumerate(k.memory_frac):
            if frac >= 1.0 and g not in self.dead:
                out += self._cuda_oom(now, g)
                self._die(g, EXCEPTION_EXIT, now)
        if k.host_memory_leak >= 1.0 and self._first(("oom-killer",)):
            alive = [g for g in range(self.gpus) if g not in self.dead]
            if alive:
                self._die(alive[0], -9, now)
        for g in k.links_down():
            failed = self._link_down.setdefault(g, now)
            if now >= failed + IB_GIVE_UP_S and g not in self.dead and self._first(("link", g)):
                if self.console is not None:
                    out.append(self.console.transport_error(now, g))
                if self.job.watchdog_teardown:
                    self._die(g, -6, failed + IB_GIVE_UP_S + TEARDOWN_S)
        return out + self.reports(now)

    def reports(self, now: float) -> list[LogEvent]:
        """The agent's reports printed by ``now`` (it reports after the job is down, so call it every tick)."""
        due = [p for p in self._pending if p[0] <= now]
        self._pending = [p for p in self._pending if p[0] > now]
        if self.console is None:
            return []
        return [self.console.worker_failed(now, at, g, code, SIGNALS.get(code)) for at, g, code in due]

    def watchdog(
        self, now: float, since: float, compute_ms: list[float], waiting: list[int], step: int
    ) -> list[LogEvent]:
        """Each of ``waiting`` (local ranks inside the collective since ``since`` plus their compute) whose
        watchdog has run out by ``now``: its timeout line, and with the teardown its death. Only when the job's
        output is simulated."""
        if self.console is None:
            return []
        out: list[LogEvent] = []
        seq = self.seq(step)
        for r in waiting:
            entered = since + compute_ms[r] / 1000.0
            printed = entered + self.job.collective_timeout_s + WATCHDOG_POLL_S * ((r * 37) % 10 + 1) / 11.0
            if now >= printed and self._first(("watchdog", since, r)):
                out.append(self.console.watchdog_timeout(now, printed, r, seq, int((printed - entered) * 1000)))
                if self.job.watchdog_teardown:
                    self._die(r, -6, printed + TEARDOWN_S)
        return out

    def seq(self, step: int) -> int:
        """The SeqNum of the first gradient bucket's all-reduce of the step after ``step``."""
        job = self.job
        buckets = math.ceil(job.n_params / (job.tensor_parallel_size * job.pipeline_parallel_size) / BUCKET_ELEMENTS)
        return SETUP_COLLECTIVES + (step - job.first_step) * buckets + 1

    def _first(self, key: tuple) -> bool:
        """True the first time ``key`` happens."""
        if key in self._told:
            return False
        self._told.add(key)
        return True

    def _die(self, g: int, code: int, at: float) -> None:
        """Local rank ``g``'s process exits with ``code`` at ``at``; torchrun's agent reports the first and ends
        the rest (the job is down from this tick on)."""
        if g in self.dead:
            return
        self.dead[g] = code
        if self.job.launcher == "torchrun" and not self.job_down:
            self.job_down = True
            self._pending.append((at + AGENT_NOTICE_S, g, code))
        elif len(self.dead) == self.gpus:
            self.job_down = True

    def _exception(self, now: float, g: int) -> list[LogEvent]:
        if self.console is None:
            return []
        exception, error = LOADER_ERROR
        pid = LOADER_PID_BASE + self.console.ranks[g]
        return [self.console.exception(now, g, exception, error.format(pid=pid))]

    def _cuda_oom(self, now: float, g: int) -> list[LogEvent]:
        return [] if self.console is None else self.console.cuda_oom(now, g, self.capacity)
