"""Failures the job's output tells, judged: the four logged signals, and the causes that explain them."""

from __future__ import annotations

from dataclasses import replace

from tests.diagnose.builders import T0, Harness, job
from trainpulse_otel.diagnose.detectors.gpu_faults import GpuHardwareFault
from trainpulse_otel.diagnose.detectors.logged import CollectiveTimeout, NetworkError, OutOfMemory, RankCrashed
from trainpulse_otel.runtime import build_pipeline, discover
from trainpulse_otel.samples import (
    CUDA_OOM,
    DRIVER_XID,
    PROCESS_FAILED,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
    LogEvent,
)

WATCHDOG = (
    "[rank{rank}]:[E1203 10:00:00.000000 1234 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
    "for 600010 milliseconds before timing out."
)


def timeout(t: float, rank: int, seq: int = 5000) -> LogEvent:
    details = {"op": "ALLREDUCE", "seq": seq, "timeout_ms": 600000, "ran_ms": 600010, "pg_rank": rank}
    message = WATCHDOG.format(rank=rank, seq=seq)
    return LogEvent(T0 + t, WATCHDOG_TIMEOUT, message, rank=rank, source=f"rank{rank}.log", line=7, details=details)


def with_events(t: float, *events: LogEvent, **changes) -> object:
    """A frame at ``t`` of a job stopped at step 100 (a failure stops it), with ``events``."""
    return replace(job(t, training={"global_step": 100}, **changes), events=events)


def test_a_watchdog_timeout_is_raised_at_once_naming_the_ranks_and_the_one_behind():
    def frame(t):
        if t == 5:  # ranks 0, 1 and 3 wait in collective 5000; rank 2 is stuck one before
            return with_events(t, timeout(t, 0), timeout(t, 1), timeout(t, 3), timeout(t, 2, seq=4999))
        return with_events(t)

    h = Harness(CollectiveTimeout()).run(range(12), frame)
    raised = h.raised("collective_timeout")  # at once, and critical on the next tick (the state machine's rule)
    assert [r.ts - T0 for r in raised] == [5.0, 6.0] and raised[0].subject == {"ranks": (0, 1, 2, 3)}
    [signal] = h.active()
    assert signal.severity == "critical"
    evidence = signal.evidence
    assert evidence["behind_ranks"] == [2] and evidence["seq_by_rank"]["2"] == 4999
    assert evidence["op"] == "ALLREDUCE" and evidence["count"] == 4 and evidence["lines"][0] == "rank0.log:7"
    assert "ALLREDUCE #5000 timed out after 600 s" in signal.message and "rank(s) 2 behind" in signal.message
    assert "missing_ranks" in evidence and evidence["missing_count"] == 4  # the job's 8 ranks: 4 never reported


def test_a_logged_failure_holds_until_training_moves_past_it_then_clears():
    steps = {t: 100 + t if t < 5 or t > 20 else 104 for t in range(30)}  # the job stops at 104, resumes at 21

    def frame(t):
        f = job(t, training={"global_step": steps[t]})
        return replace(f, events=(timeout(t, 3),)) if t == 5 else f

    h = Harness(CollectiveTimeout()).run(range(30), frame)
    assert [e.ts - T0 for e in h.raised()] == [5.0, 6.0]
    [cleared] = h.cleared()
    assert 21 <= cleared.ts - T0 <= 27  # training moved past step 104: the episode ends, the signal clears soon


def test_each_failure_kind_is_its_own_signal_with_its_subject():
    events = (
        LogEvent(T0 + 3, TRANSPORT_ERROR, "NCCL WARN NET/IB : Got completion …", 5, "node-007", details={"error": 12}),
        LogEvent(T0 + 3, CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory.", 2, None, 2, details={}),
        LogEvent(T0 + 3, PROCESS_FAILED, "RuntimeError: boom", 6, None, details={"exception": "RuntimeError"}),
    )
    subjects = {}
    for detector in (NetworkError(), OutOfMemory(), RankCrashed()):
        h = Harness(detector).run(range(6), lambda t: with_events(t, *events) if t == 3 else with_events(t))
        [signal] = h.active()
        subjects[signal.name] = (signal.subject, signal.message)
    assert subjects["network_error"][0] == {"rank": 5, "hostname": "node-007"}
    assert subjects["out_of_memory"][0] == {"rank": 2, "gpu_index": 2}
    assert subjects["rank_crashed"][0] == {"rank": 6} and "RuntimeError" in subjects["rank_crashed"][1]


def test_a_logged_fatal_xid_is_a_hardware_fault_by_its_pci_address():
    xid = LogEvent(T0 + 2, DRIVER_XID, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
                   details={"xid": 79, "pci": "0000:3b:00"})  # fmt: skip
    h = Harness(GpuHardwareFault()).run(range(5), lambda t: with_events(t, xid) if t == 2 else with_events(t))
    [signal] = h.active()
    assert signal.subject == {"pci_bus_id": "0000:3b:00", "hostname": "node-000"}
    assert "the GPU at PCI 0000:3b:00 on node-000 is failing: XID 79" in signal.message


def diagnose(frames) -> object:
    pipeline = build_pipeline(discover(autoload=False))
    for frame in frames:
        result = pipeline.update(frame)
    return result.diagnosis


def test_a_dead_rank_explains_the_others_timing_out_and_a_broken_link_explains_both():
    crash = LogEvent(T0 + 4, PROCESS_FAILED, "RuntimeError: CUDA error", 2, "node-001",
                     details={"exception": "RuntimeError", "error": "CUDA error"})  # fmt: skip
    waits = tuple(timeout(6, r) for r in (0, 1, 3))
    plain = diagnose(with_events(t, *({4: (crash,), 6: waits}.get(t, ()))) for t in range(10))
    assert [c.cause for c in plain.root_causes][:2] == ["rank_failure", "rank_hang"]
    assert plain.root_causes[0].subject == {"rank": 2, "hostname": "node-001", "exception": "RuntimeError"}
    link = LogEvent(T0 + 3, TRANSPORT_ERROR, "NCCL WARN NET/IB : Got completion from peer …", 2, "node-001",
                    details={"transport": "IB", "error": 12})  # fmt: skip
    events = {3: (link,), 4: (crash,), 6: waits}
    deeper = diagnose(with_events(t, *events.get(t, ())) for t in range(10))
    assert deeper.root_causes[0].cause == "network_failure"
    assert deeper.root_causes[0].subject == {"rank": 2, "hostname": "node-001"}
    assert {"rank_crashed", "collective_timeout"} <= set(deeper.root_causes[0].signals)


def test_cuda_out_of_memory_is_gpu_memory_pressure_and_explains_the_crash_it_caused():
    oom = LogEvent(T0 + 4, CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", 3,
                   gpu_index=3, details={"requested_bytes": 2 << 30})  # fmt: skip
    crash = LogEvent(T0 + 4, PROCESS_FAILED, "torch.OutOfMemoryError: CUDA out of memory.", 3,
                     details={"exception": "torch.OutOfMemoryError"})  # fmt: skip
    d = diagnose(with_events(t, *((oom, crash) if t == 4 else ())) for t in range(8))
    top = d.root_causes[0]
    assert top.cause == "gpu_memory_pressure" and top.subject == {"rank": 3, "gpu_index": 3}
    assert "rank_crashed" in top.signals and "2.00 GiB" in top.summary
    assert "rank_failure" not in [c.cause for c in d.root_causes]  # its crash is the OOM's consequence


def test_a_watchdog_timeout_alone_is_a_rank_hang_of_the_rank_behind():
    events = (timeout(5, 0), timeout(5, 1), timeout(5, 2, seq=4999), timeout(5, 3))
    d = diagnose(with_events(t, *(events if t == 5 else ())) for t in range(9))
    top = d.root_causes[0]
    assert top.cause == "rank_hang" and top.subject == {"rank": 2}
    assert "sequence numbers lag" in top.summary and "py-spy dump" in top.remediation


def aborted_rank(t: float, rank: int) -> LogEvent:
    """torchrun's table for a rank its watchdog tore down (tests/fixtures/logs/failures/2023_old_form_…)."""
    return LogEvent(T0 + t, PROCESS_FAILED, "exitcode  : -6 (pid: 3438)", rank,
                    details={"exit_code": -6, "signal": "SIGABRT", "pid": 3438})  # fmt: skip


def test_ranks_their_watchdog_aborted_are_the_hang_s_consequence_not_a_rank_failure():
    events = {5: tuple(timeout(5, r) for r in (1, 4, 5, 7)), 6: (aborted_rank(6, 7), aborted_rank(6, 0))}
    d = diagnose(with_events(t, *events.get(t, ())) for t in range(10))
    assert [c.cause for c in d.root_causes] == ["rank_hang"]
    assert {"collective_timeout", "rank_crashed"} <= set(d.root_causes[0].signals)
    alone = diagnose(with_events(t, *((aborted_rank(6, 7),) if t == 6 else ())) for t in range(10))
    assert alone.root_causes[0].cause == "rank_failure"  # a native abort with no timeout is the rank's own crash


def test_an_unprefixed_watchdog_line_is_of_the_watchdog_s_own_rank():
    old = LogEvent(T0 + 5, WATCHDOG_TIMEOUT, "[Rank 7] Watchdog caught collective operation timeout: …",
                   details={"op": "ALLREDUCE", "seq": 1, "pg_rank": 7})  # fmt: skip
    d = diagnose(with_events(t, *((old,) if t == 5 else ())) for t in range(8))
    (signal,) = [s for s in d.signals if s.name == "collective_timeout"]
    assert signal.subject == {"ranks": (7,)}


def launcher_killed(t: float, local_rank: int, line: int) -> LogEvent:
    """torchrun's agent line for a worker that died of SIGKILL, no exception of its own (ColossalAI#2531's)."""
    text = f"failed (exitcode: -9) local_rank: {local_rank} (pid: 12076) of binary: /usr/bin/python"
    return LogEvent(T0 + t, PROCESS_FAILED, text, source="job.log", line=line,
                    details={"exit_code": -9, "signal": "SIGKILL", "local_rank": local_rank, "pid": 12076})  # fmt: skip


def test_a_death_the_launcher_tells_after_a_timeout_is_the_hang_s_teardown_and_one_before_is_its_cause():
    """torchrun notices a dead worker within seconds: a death it tells after a watchdog's timeout came after the
    hang began. In one tick (an unstamped excerpt) the order of the lines decides."""
    hang = replace(timeout(5, 0), source="job.log", line=1)
    after = diagnose(with_events(t, *((hang, launcher_killed(5, 1, 14)) if t == 5 else ())) for t in range(10))
    assert [c.cause for c in after.root_causes][:1] == ["rank_hang"]
    assert "rank_failure" not in [c.cause for c in after.root_causes]
    first = replace(timeout(5, 0), source="job.log", line=20)
    before = diagnose(with_events(t, *((launcher_killed(5, 1, 3), first) if t == 5 else ())) for t in range(10))
    assert before.root_causes[0].cause == "rank_failure"  # killed first (the OOM killer): the others then wait


def test_what_a_rank_raises_after_its_own_watchdog_timed_out_is_the_hang_s_aftermath():
    """The corpus's ``pytorch_collective_timeout_ddp-init-allgather-seq1-dump-signal-py313``: every rank's watchdog
    times out, then rank 2 raises from the call site of the failed collective. A rank that raised first, before any
    timeout of its own, is the cause the others waited for."""

    def raised(line: int) -> LogEvent:
        return LogEvent(T0 + 5, PROCESS_FAILED, "RuntimeError: DDP expects same model across all ranks", 2,
                        source="job.log", line=line, details={"exception": "RuntimeError"})  # fmt: skip

    hang = tuple(replace(timeout(5, r), source="job.log", line=1 + r) for r in range(4))
    after = diagnose(with_events(t, *((*hang, raised(40)) if t == 5 else ())) for t in range(10))
    assert [c.cause for c in after.root_causes][:1] == ["rank_hang"]
    assert "rank_failure" not in [c.cause for c in after.root_causes]
    others = tuple(replace(timeout(5, r), source="job.log", line=20 + r) for r in (0, 1, 3))
    before = diagnose(with_events(t, *((raised(10), *others) if t == 5 else ())) for t in range(10))
    assert before.root_causes[0].cause == "rank_failure" and before.root_causes[0].subject["rank"] == 2


def test_a_worker_s_exit_the_lines_show_no_cause_of_beside_another_rank_s_oom_is_the_oom_s():
    """torchtitan's sweep (the corpus's ``torchtitan_out_of_memory_b200-flex-backward-only-prefetch-…``): the agent
    says local rank 6 exited 1, the table the excerpt holds shows rank 4's OOM. A worker killed by a signal stays
    a death of its own (the OOM killer, a segfault): only an exit code the process chose is the OOM's."""

    def exited(code: int, signal: str | None = None) -> LogEvent:
        details = {"exit_code": code, "local_rank": 6, "pid": 4242, **({"signal": signal} if signal else {})}
        text = f"failed (exitcode: {code}) local_rank: 6 (pid: 4242) of binary: /usr/bin/python"
        return LogEvent(T0 + 5, PROCESS_FAILED, text, source="job.log", line=20, details=details)

    oom = LogEvent(T0 + 5, CUDA_OOM, "torch.OutOfMemoryError: CUDA out of memory.", 4, source="job.log", line=139,
                   details={})  # fmt: skip
    exit_1 = diagnose(with_events(t, *((exited(1), oom) if t == 5 else ())) for t in range(10))
    assert exit_1.root_causes[0].cause == "gpu_memory_pressure"
    assert "rank_failure" not in [c.cause for c in exit_1.root_causes]
    killed = diagnose(with_events(t, *((exited(-9, "SIGKILL"), oom) if t == 5 else ())) for t in range(10))
    assert "rank_failure" in [c.cause for c in killed.root_causes]


def test_a_dead_worker_naming_only_its_host_is_the_cause_of_a_reset_a_rank_there_sees_after_it():
    """Ray's dead actor names its node, no rank; a rank on that node then loses its store connection. One host
    runs many processes: the reset is the death's consequence, as it is where neither line names a host."""
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly"
    dead = LogEvent(T0 + 4, PROCESS_FAILED, died, None, "node-1", source="job.log", line=40, details={})
    said = "[rank7]: recvValue failed on SocketImpl: Connection reset by peer"
    reset = LogEvent(T0 + 5, TRANSPORT_ERROR, said, 7, "node-1", source="job.log", line=75, details={"error": said})
    d = diagnose(with_events(t, *({4: (dead,), 5: (reset,)}.get(t, ()))) for t in range(10))
    assert d.root_causes[0].cause == "rank_failure"
    assert d.root_causes[0].subject.get("hostname") == "node-1"
    assert "network_failure" not in [c.cause for c in d.root_causes]


def test_the_survivors_aborting_after_a_rank_s_oom_are_its_teardown():
    """MLPerf's R-GAT (round 31, train): rank 7 runs out of GPU memory; the other seven abort (the shell's
    ``Aborted (core dumped)``: SIGABRT) when their loaders give up waiting on it. The OOM is the cause, not seven
    rank failures."""
    said = "torch.OutOfMemoryError: CUDA out of memory. GPU 7 has a total capacity of 139.80 GiB"
    oom = LogEvent(T0 + 4, CUDA_OOM, said, 7, gpu_index=7, source="job.log", line=90, details={})
    line = "/workspace/gnn/run_and_time.sh: line 218: 47630 Aborted (core dumped) ${COMMAND[@]}"
    abort = {"signal": "SIGABRT", "error": "Aborted"}
    aborts = tuple(
        LogEvent(T0 + 4, PROCESS_FAILED, line, r, source="job.log", line=100 + r, details=abort) for r in range(7)
    )
    d = diagnose(with_events(t, *((oom, *aborts) if t == 4 else ())) for t in range(10))
    assert d.root_causes[0].cause == "gpu_memory_pressure" and d.root_causes[0].subject.get("rank") == 7
    assert "rank_failure" not in [c.cause for c in d.root_causes]


def test_an_oom_names_the_host_its_rank_s_death_line_names():
    """Horovod under mpirun (round 32, train): rank 1's ``CUDA_ERROR_OUT_OF_MEMORY`` names no host; mpirun's ``process
    rank 1 with PID 0 on node aaron-argo-1 exited on signal 6`` does. The OOM's cause names rank 1 on that node."""
    oom = LogEvent(T0 + 4, CUDA_OOM, "failed to allocate 2.96G from device: CUDA_ERROR_OUT_OF_MEMORY", 1, details={})
    said = "mpirun noticed that process rank 1 with PID 0 on node aaron-argo-1 exited on signal 6 (Aborted)."
    died = LogEvent(T0 + 4, PROCESS_FAILED, said, 1, details={"signal": "SIGABRT", "host": "aaron-argo-1"})
    d = diagnose(with_events(t, *((oom, died) if t == 4 else ())) for t in range(10))
    assert d.root_causes[0].cause == "gpu_memory_pressure"
    assert d.root_causes[0].subject == {"rank": 1, "hostname": "aaron-argo-1"}
