"""What the simulated job prints when it fails: one scenario per signal read from a job's output.

Each prints the lines a PyTorch 2.5 / NCCL 2.21 job prints for its fault, as the events the log reader makes of
them, at the moment the physics says, and the rest of the node shows the same fault (a hung or dead rank's GPU
idles, its peers spin in the collective, a job torchrun ended holds no GPU memory).
"""

from __future__ import annotations

import re

import pytest

from tests.collect.sim_runs import START, run, ticks, training
from trainpulse_otel.collect.sim import GPU_MEMORY_BYTES, SimulatedNode
from trainpulse_otel.collect.sim.console import BUCKET_ELEMENTS, LOGITS_BYTES
from trainpulse_otel.collect.sim.job import IB_GIVE_UP_S
from trainpulse_otel.collect.sim.scenarios import SCENARIOS, SHORT_WATCHDOG_S
from trainpulse_otel.evaluation.sim_replay import sim_records
from trainpulse_otel.logs.lines import LogLine
from trainpulse_otel.logs.reader import LogReader
from trainpulse_otel.samples import (
    CUDA_OOM,
    PROCESS_FAILED,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
    LogEvent,
    parse_log_event,
)

LOGGED = ("collective_timeout", "network_error", "out_of_memory", "rank_crashed")
WATCHDOG_LINE = re.compile(
    r"^\[rank(\d+)\]:\[E1129 \d\d:\d\d:\d\d\.\d{9} ProcessGroupNCCL\.cpp:616\] \[Rank \1\] Watchdog caught collective "
    r"operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=ALLREDUCE, NumelIn=13107200, NumelOut=13107200, "
    r"Timeout\(ms\)=60000\) ran for (\d+) milliseconds before timing out\.$"
)


def printed(name: str) -> list[tuple[float, LogEvent]]:
    """Every event of a scenario's run, with the tick (seconds since start) that carried it."""
    return [(t, e) for t, c in run(name) for e in c.events or ()]


def test_only_a_job_whose_output_is_read_prints_and_every_event_is_a_valid_trace_event():
    for name, scenario in SCENARIOS.items():
        events = printed(name) if scenario.job.get("logs") else []
        assert bool(events) == (name in LOGGED), name
        for t, e in events:
            assert e.ts == START + t and parse_log_event(e.to_dict()) == e
            assert e.hostname == "node-000" and e.rank is not None and e.source and e.source.startswith("logs/")
    for name in ("training_stalled", "gpu_memory_leak", "gpu_hardware_fault", "node_unreachable"):
        assert all(c.events is None for _, c in run(name)), name  # the same faults, their output not read


def test_collective_timeout_every_waiting_rank_times_out_on_the_same_collective_and_the_hung_one_says_nothing():
    onset = SCENARIOS["collective_timeout"].onset_s
    events = printed("collective_timeout")
    assert {e.kind for _, e in events} == {WATCHDOG_TIMEOUT}
    assert sorted(e.rank for _, e in events) == [0, 1, 2, 3, 4, 5, 7]  # rank 6 is stuck before the collective
    lines = [WATCHDOG_LINE.match(e.message) for _, e in events]
    assert all(lines) and len({m[2] for m in lines}) == 1  # one SeqNum: the all-reduce they all wait in
    for (t, e), m in zip(events, lines, strict=True):
        assert int(m[3]) == e.details["ran_ms"] and SHORT_WATCHDOG_S * 1000 <= e.details["ran_ms"] < 60200
        assert e.details["seq"] == int(m[2]) and e.details["numel_in"] == BUCKET_ELEMENTS and e.gpu_index is None
        assert onset + SHORT_WATCHDOG_S < t <= onset + SHORT_WATCHDOG_S + 3  # entered ~1.7 s after the hang, + 60 s
    hung = ticks(run("collective_timeout"), onset + 1)
    assert all(c.training is None for c in hung)  # no step, no heartbeat: the job sends none
    assert all(g.utilization_percent == (0.0 if g.index == 6 else 100.0) for c in hung for g in c.gpus)


def test_network_error_rank_2_reports_its_ib_link_then_dies_and_torchrun_ends_the_job():
    scenario = SCENARIOS["network_error"]
    onset, samples = scenario.onset_s, run("network_error")
    assert {r.hostname for r in training(samples, 0, 1)[0].ranks} == {"node-000", "node-001"}  # 16 ranks, 2 nodes
    (t_ib, ib), (t_dead, dead) = printed("network_error")
    assert ib.kind == TRANSPORT_ERROR and (ib.rank, ib.gpu_index) == (2, 2) and t_ib == onset + 9  # ~8.6 s of retries
    assert (
        ib.message.startswith("[rank2]:node-000:41002:") and "NCCL WARN NET/IB : Got completion from peer" in ib.message
    )
    assert "with status=12 opcode=0 len=0 vendor err 129 (Send)" in ib.message and ib.details["error"] == 12
    assert dead.kind == PROCESS_FAILED and dead.rank == 2 and t_dead == t_ib + 1
    assert "failed (exitcode: -6) local_rank: 2 (pid: 41002)" in dead.message and dead.details["signal"] == "SIGABRT"
    stuck = ticks(samples, onset, t_ib)  # all in the all-reduce until rank 2 gives up: every GPU spins
    assert all(g.utilization_percent == 100.0 for c in stuck for g in c.gpus) and IB_GIVE_UP_S > 8
    gone = ticks(samples, t_ib)
    assert all(c.training is None for c in gone)
    assert all(g.utilization_percent == 0.0 and g.memory_used_bytes < 2**30 for c in gone for g in c.gpus)


def test_out_of_memory_rank_3_cannot_fit_its_logits_dies_of_it_and_torchrun_ends_the_job():
    scenario = SCENARIOS["out_of_memory"]
    kill, samples = scenario.exhaust_s, run("out_of_memory")
    assert kill == scenario.onset_s + 240 and scenario.after_kill and kill < scenario.duration_s
    (t, oom), (_, crash), (t_report, report) = printed("out_of_memory")
    assert t == kill and t_report == kill + 1
    assert oom.kind == CUDA_OOM and crash.kind == PROCESS_FAILED and oom.message == crash.message
    assert (oom.rank, oom.gpu_index, crash.rank) == (3, 3, 3)
    assert oom.message.startswith(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 3 has a total "
        "capacity of 79.15 GiB of which 1.17 GiB is free."
    )
    sizes = oom.details
    assert sizes["requested_bytes"] == pytest.approx(LOGITS_BYTES, rel=0.01) and sizes["free_bytes"] < LOGITS_BYTES
    assert sizes["total_bytes"] < GPU_MEMORY_BYTES and sizes["in_use_bytes"] + sizes["free_bytes"] == pytest.approx(
        sizes["total_bytes"], abs=2e7
    )
    assert crash.details == {"exception": "torch.OutOfMemoryError", "error": "CUDA out of memory"}
    assert "failed (exitcode: 1) local_rank: 3 (pid: 41003)" in report.message and report.rank == 3
    before = next(c for tt, c in samples if tt == kill - 1)
    assert next(g for g in before.gpus if g.index == 3).memory_used_bytes > 0.99 * GPU_MEMORY_BYTES
    assert all(c.training is None and max(g.utilization_percent for g in c.gpus) == 0.0 for c in ticks(samples, kill))


def test_rank_crashed_rank_1_raises_in_its_own_file_and_the_other_srun_tasks_wait_for_it():
    onset, samples = SCENARIOS["rank_crashed"].onset_s, run("rank_crashed")
    ((t, crash),) = printed("rank_crashed")
    assert t == onset and crash.kind == PROCESS_FAILED and crash.rank == 1 and crash.gpu_index is None
    assert crash.message == "RuntimeError: DataLoader worker (pid(s) 52119) exited unexpectedly"  # no prefix
    assert crash.source == "logs/llama-3-8b-731942-1.out"  # srun --output=%x-%j-%t.out: the task's own file
    assert crash.details == {
        "exception": "RuntimeError",
        "error": "DataLoader worker (pid(s) 52119) exited unexpectedly",
    }
    waiting = ticks(samples, onset)
    assert all(c.training is None for c in waiting)
    for g in (g for c in waiting for g in c.gpus):
        if g.index == 1:  # its process is gone: idle, memory freed
            assert g.utilization_percent == 0.0 and g.memory_used_bytes < 2**30
        else:  # the others spin in the all-reduce, their memory held
            assert g.utilization_percent == 100.0 and g.power_watts < 200 and g.memory_used_bytes > 50e9


def test_the_same_seed_prints_the_same_lines_and_the_trace_puts_them_before_the_tick():
    again = SimulatedNode("collective_timeout", seed=0, start_ts=START)
    lines = [e for t in range(200) for e in again.sample(float(t)).events or ()]
    assert lines == [e for _, e in printed("collective_timeout")]
    records = list(sim_records(SCENARIOS["rank_crashed"], 0, 92.0))
    kinds = [r.kind for r in records if r.ts == START + 90]
    assert kinds == ["event", "gpus", "host"]  # no step that tick: the crash, then the samples


@pytest.mark.parametrize("name", LOGGED)
def test_a_line_the_log_reader_knows_reads_back_as_the_same_event(name):
    """The simulated events are what the log reader makes of their lines: the kind, the rank, the details both
    give (a multi-line report's last line alone may tell nothing yet: the reader waits for the rest)."""
    for _, e in printed(name):
        reader = LogReader()
        read = reader.feed(LogLine(e.message, source=e.source, node=e.hostname, ts=e.ts))
        read += reader.flush()
        for x in (x for x in read if isinstance(x, LogEvent) and x.kind == e.kind):
            assert x.rank in (e.rank, None) and x.hostname == e.hostname, x
            shared = set(x.details) & set(e.details)
            assert {k: x.details[k] for k in shared} == {k: e.details[k] for k in shared}, x
