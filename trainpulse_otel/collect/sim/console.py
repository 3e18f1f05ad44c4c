"""What the simulated job prints when it fails: the lines a PyTorch 2.5 / NCCL 2.21 job writes, as events.

A :class:`Console` writes one failure line of one rank — NCCL's watchdog timeout, an InfiniBand completion
error, CUDA running out of memory, a Python exception, torchrun's report of a dead worker — in the form the
real job prints it (each format's source: docs/simulation.md, "What the job prints"), and hands it on as the
:class:`~trainpulse_otel.samples.LogEvent` the log reader makes of that line. Lines of a ``torchrun`` job carry
its ``[rankN]:`` prefix and go to the job's one log; an ``srun`` task writes its own file (``…-N.out``). Pure:
no clock, no randomness; the node (:mod:`.node`) says when and which rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...samples import (
    CHECKPOINT_LOADED,
    CUDA_OOM,
    PROCESS_FAILED,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
    WORKERS_RESTARTED,
    LogEvent,
)
from .job import JobConfig
from .physics import GIB
from .training import PID_BASE

#: The Slurm job the simulated ranks run in (it names their log files).
SLURM_JOB_ID = 731942
#: torchrun's elastic agent on this node, and the interpreter it started the workers with.
AGENT_PID = PID_BASE - 13
PYTHON = "/usr/bin/python3"
NCCL_VERSION = "2.21.5"
#: ProcessGroupNCCL's watchdog looks at its collectives every 100 ms: a timeout is told up to that late.
WATCHDOG_POLL_S = 0.1
#: DDP all-reduces gradients in 25 MiB buckets: 13,107,200 bf16 elements each.
BUCKET_ELEMENTS = 25 * 2**20 // 2
#: NCCL collectives a rank issues before its first step (the barrier, the parameters' broadcast, …).
SETUP_COLLECTIVES = 3
#: The bf16 logits of one micro-batch (2 × 4,096 tokens × llama-3's 128,256-token vocabulary): what a step
#: allocates last and largest, so what a GPU full to the brim fails to allocate.
LOGITS_BYTES = 2 * 4096 * 128256 * 2
#: What the CUDA context, cuBLAS workspaces and NCCL's buffers hold besides PyTorch's allocator, and what
#: the allocator had reserved but not handed out when the allocation failed (fragmentation).
NON_PYTORCH_BYTES = 1.5 * GIB
RESERVED_UNALLOCATED_BYTES = 1.06 * GIB


def _stamp(ts: float) -> tuple[datetime, int]:
    when = datetime.fromtimestamp(ts, timezone.utc)
    return when, round((ts % 1.0) * 1e9) % 1_000_000_000


def _c10(ts: float, where: str) -> str:
    """The c10 logger's prefix (``[E1129 07:08:12.345678901 ProcessGroupNCCL.cpp:616]``), in UTC."""
    when, nanos = _stamp(ts)
    return f"[E{when.month}{when.day:02d} {when:%H:%M:%S}.{nanos:09d} {where}]"


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def _said(n: float) -> int:
    """``n`` bytes as a message in GiB to two decimals says them."""
    return round(float(f"{n / GIB:.2f}") * GIB)


@dataclass(frozen=True, slots=True)
class Console:
    """The simulated job's output on ``hostname``: ``ranks[r]`` is internal rank r's global rank (rank r runs on
    local GPU r)."""

    job: JobConfig
    hostname: str
    ranks: list[int]
    gpus: int

    def watchdog_timeout(self, ts: float, printed: float, r: int, seq: int, ran_ms: int) -> LogEvent:
        """Rank ``r``'s NCCL watchdog gave up on collective ``seq`` after ``ran_ms`` ms (printed at ``printed``)."""
        rank, timeout_ms = self.ranks[r], int(self.job.collective_timeout_s * 1000)
        work = (
            f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={BUCKET_ELEMENTS}, NumelOut={BUCKET_ELEMENTS}, "
            f"Timeout(ms)={timeout_ms})"
        )
        text = (
            f"{_c10(printed, 'ProcessGroupNCCL.cpp:616')} [Rank {rank}] Watchdog caught collective operation "
            f"timeout: {work} ran for {ran_ms} milliseconds before timing out."
        )
        details = {
            "backend": "nccl",
            "op": "ALLREDUCE",
            "seq": seq,
            "timeout_ms": timeout_ms,
            "numel_in": BUCKET_ELEMENTS,
            "numel_out": BUCKET_ELEMENTS,
            "ran_ms": ran_ms,
            "pg_rank": rank,
        }
        return self._event(ts, WATCHDOG_TIMEOUT, self._native(r, text), r, details)

    def transport_error(self, ts: float, r: int) -> LogEvent:
        """Rank ``r``'s InfiniBand transfer to its peer on the next node failed: retries exhausted (status 12)."""
        peer = f"10.10.{r % self.gpus}.2<{43000 + r}>"
        pid = PID_BASE + self.ranks[r]
        text = (
            f"{self.hostname}:{pid}:{pid + 331} [{r % self.gpus}] transport/net_ib.cc:1909 NCCL WARN NET/IB : Got "
            f"completion from peer {peer} with status=12 opcode=0 len=0 vendor err 129 (Send)"
        )
        details = {"transport": "IB", "error": 12, "peer": peer, "opcode": 0, "len": 0, "vendor_err": 129}
        details["direction"] = "Send"
        return self._event(ts, TRANSPORT_ERROR, self._native(r, text), r, details, gpu=r % self.gpus)

    def cuda_oom(self, ts: float, r: int, capacity: float) -> list[LogEvent]:
        """Rank ``r``'s GPU (``capacity`` bytes as CUDA counts them) could not fit the step's logits: the
        ``torch.OutOfMemoryError`` that ends its traceback, told as the failed allocation and as the crash."""
        free = 0.6 * LOGITS_BYTES
        in_use = capacity - free
        allocated = in_use - NON_PYTORCH_BYTES - RESERVED_UNALLOCATED_BYTES
        said = {  # as the message gives them: GiB to two decimals
            "requested_bytes": _said(LOGITS_BYTES),
            "total_bytes": _said(capacity),
            "free_bytes": _said(free),
            "in_use_bytes": _said(in_use),
            "allocated_bytes": _said(allocated),
            "reserved_unallocated_bytes": _said(RESERVED_UNALLOCATED_BYTES),
        }
        said["reserved_bytes"] = said["allocated_bytes"] + said["reserved_unallocated_bytes"]
        error = (
            f"CUDA out of memory. Tried to allocate {_gib(LOGITS_BYTES)}. GPU {r % self.gpus} has a total capacity "
            f"of {_gib(capacity)} of which {_gib(free)} is free. Including non-PyTorch memory, this process has "
            f"{_gib(in_use)} memory in use. Of the allocated memory {_gib(allocated)} is allocated by PyTorch, "
            f"and {_gib(RESERVED_UNALLOCATED_BYTES)} is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
            "fragmentation.  See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
        text = self._python(r, f"torch.OutOfMemoryError: {error}")
        crash = {"exception": "torch.OutOfMemoryError", "error": error.split(". ", 1)[0]}
        oom = self._event(ts, CUDA_OOM, text, r, said, gpu=r % self.gpus)
        return [oom, self._event(ts, PROCESS_FAILED, text, r, crash)]

    def exception(self, ts: float, r: int, exception: str, error: str) -> LogEvent:
        """The last line of rank ``r``'s traceback: the exception that ended it."""
        text = self._python(r, f"{exception}: {error}")
        return self._event(ts, PROCESS_FAILED, text, r, {"exception": exception, "error": error})

    def worker_failed(self, ts: float, printed: float, r: int, exit_code: int, signal: str | None) -> LogEvent:
        """torchrun's agent on this node saw local worker ``r`` exit with ``exit_code`` (negative: killed by
        ``signal``); it stops the node's other workers and reports it. Its line, with the details (and the global
        rank) of the ChildFailedError table that follows it, the root cause's entry."""
        when, _ = _stamp(printed)
        micros = round((printed % 1.0) * 1000) % 1000 * 1000  # Python logging: milliseconds
        local = r % self.gpus
        text = (
            f"E{when.month}{when.day:02d} {when:%H:%M:%S}.{micros:06d} {AGENT_PID} "
            "torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: "
            f"{exit_code}) local_rank: {local} (pid: {PID_BASE + self.ranks[r]}) of binary: {PYTHON}"
        )
        pid = PID_BASE + self.ranks[r]
        details: dict[str, Any] = {"root_cause": True, "local_rank": local, "exit_code": exit_code, "pid": pid}
        if signal is not None:
            details["signal"] = signal
        details["host"] = self.hostname
        return self._event(ts, PROCESS_FAILED, text, r, details, source=self._log())

    def restarting(self, ts: float, remaining: int, max_restarts: int) -> LogEvent:
        """torchrun's agent restarting the worker group (``--max-restarts``; printed at ``LOGLEVEL=INFO``)."""
        when, _ = _stamp(ts)
        micros = round((ts % 1.0) * 1000) % 1000 * 1000
        text = (
            f"I{when.month}{when.day:02d} {when:%H:%M:%S}.{micros:06d} {AGENT_PID} "
            f"torch/distributed/elastic/agent/server/api.py:942] [default] Worker group FAILED. "
            f"{remaining}/{max_restarts} attempts left; will restart worker group"
        )
        details = {"state": "FAILED", "remaining": remaining, "max_restarts": max_restarts, "role": "default"}
        return LogEvent(
            ts=ts, kind=WORKERS_RESTARTED, message=text, hostname=self.hostname, source=self._log(), details=details
        )

    def checkpoint_loaded(self, ts: float, seconds: float) -> LogEvent:
        """Rank 0's torchtitan-style line as the restarted job's load ends."""
        text = (
            f"[rank{self.ranks[0]}]:[titan] - root - INFO - Finished loading the checkpoint in {seconds:.2f} seconds."
        )
        return self._event(ts, CHECKPOINT_LOADED, text, 0, {"duration_s": round(seconds, 2)})

    def _native(self, r: int, text: str) -> str:
        """A line C++ code (c10, NCCL) wrote to the rank's stderr: torchrun's prefix runs straight into it."""
        return f"[rank{self.ranks[r]}]:{text}" if self.job.launcher == "torchrun" else text

    def _python(self, r: int, text: str) -> str:
        """A line Python wrote (a traceback's)."""
        return f"[rank{self.ranks[r]}]: {text}" if self.job.launcher == "torchrun" else text

    def _log(self, r: int | None = None) -> str:
        """The file the line is in: the job's log (torchrun), or the task's own (srun ``--output=%x-%j-%t.out``)."""
        name = f"logs/{self.job.model_name}-{SLURM_JOB_ID}"
        return f"{name}.log" if r is None or self.job.launcher == "torchrun" else f"{name}-{self.ranks[r]}.out"

    def _event(
        self,
        ts: float,
        kind: str,
        text: str,
        r: int,
        details: dict[str, Any],
        gpu: int | None = None,
        source: str | None = None,
    ) -> LogEvent:
        """The event the log reader makes of the line: its rank (the prefix's, the file's, torchrun's table's),
        and its GPU only where the line names one (NCCL's ``[2]``, ``GPU 3``)."""
        return LogEvent(
            ts=ts,
            kind=kind,
            message=text,
            rank=self.ranks[r],
            hostname=self.hostname,
            gpu_index=gpu,
            source=source or self._log(r),
            details=details,
        )
