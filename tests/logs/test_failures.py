"""The failure lines every job prints, read from real lines (tests/fixtures/logs/failures, cited in SOURCES.md)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.diagnose.builders import T0, Harness, job
from tests.logs.excerpts import TRAIN, read_excerpt
from trainpulse_otel.collect import kmsg
from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose.detectors.logged import CollectiveTimeout
from trainpulse_otel.logs import LogLine, LogReader, split_prefixes
from trainpulse_otel.logs import xid as logs_xid
from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.logs.lines import split_glog
from trainpulse_otel.runtime import replay_logs
from trainpulse_otel.samples import (
    CUDA_OOM,
    DRIVER_XID,
    GPU_FAULT,
    PROCESS_FAILED,
    PROGRESS_GAP,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
    LogEvent,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
FAILURES = FIXTURES / "failures"
GIB = 2**30


def read(name: str, node: str | None = None) -> list[LogEvent]:
    """A fixture read as a replayed file is: every line, then the end of the file."""
    reader = LogReader()
    out: list[Any] = []
    for number, text in enumerate((FAILURES / name).read_text().splitlines(), 1):
        out += reader.feed(LogLine(text, name, number, node=node))
    out += reader.flush()
    return [e for e in out if isinstance(e, LogEvent)]


def told(events: list[LogEvent]) -> list[tuple[str, int | None]]:
    return [(e.kind, e.rank) for e in events]


# Each fixture, and what it tells: (kind, rank, details it must give), in order.
EXPECTED: dict[str, list[tuple[str, int | None, dict[str, Any]]]] = {
    "2022_old_form_eight_v100.txt": [
        (WATCHDOG_TIMEOUT, None, {"op": "ALLREDUCE", "seq": 469508, "timeout_ms": 1800000, "pg_rank": r})
        for r in (1, 3, 2, 6, 7)
    ],
    "2024_old_form_bar_glued_several_seqs.txt": [  # the repeated 96125 line is the same timeout: told once
        (WATCHDOG_TIMEOUT, None, {"seq": 96120, "pg_rank": 0, "ran_ms": 25624887}),
        (WATCHDOG_TIMEOUT, None, {"seq": 96117, "pg_rank": 0}),
        (WATCHDOG_TIMEOUT, None, {"seq": 96125, "pg_rank": 0}),
        (WATCHDOG_TIMEOUT, None, {"seq": 64088, "pg_rank": 7}),
    ],
    "2023_old_form_numel_sigabrt_table.txt": [
        *[
            (WATCHDOG_TIMEOUT, None, {"seq": 1, "numel_in": 1, "timeout_ms": 120000, "pg_rank": r})
            for r in (1, 7, 4, 5)
        ],
        (PROCESS_FAILED, 7, {"exit_code": -6, "pid": 3438, "signal": "SIGABRT", "local_rank": 7, "root_cause": False}),
        (
            PROCESS_FAILED,
            0,
            {"exit_code": -6, "pid": 3431, "signal": "SIGABRT", "host": "472a4389fceb", "root_cause": True},
        ),
    ],
    "2025_pg_guid_three_ranks.txt": [
        (WATCHDOG_TIMEOUT, r, {"seq": 808, "op": "ALLREDUCE", "numel_in": 9801523, "numel_out": 9801523, "pg_rank": r})
        for r in (1, 0, 2)
    ],
    "2025_seqs_disagree_collector_stamp.txt": [  # two ranks stuck in different collectives: each keeps its own
        (WATCHDOG_TIMEOUT, 13, {"seq": 216, "op": "ALLTOALL_BASE", "pg_rank": 1, "numel_out": 1572864}),
        (WATCHDOG_TIMEOUT, 15, {"seq": 57, "op": "ALLREDUCE", "pg_rank": 1, "numel_out": 32}),
    ],
    "2024_ops_disagree_same_seq.txt": [
        (WATCHDOG_TIMEOUT, 7, {"seq": 80078, "op": "BROADCAST", "pg_rank": 7}),
        (WATCHDOG_TIMEOUT, 3, {"seq": 80078, "op": "ALLREDUCE", "pg_rank": 3}),
    ],
    "2024_ray_rethrow_told_once.txt": [
        (WATCHDOG_TIMEOUT, 1, {"seq": 158046, "op": "GATHER", "numel_out": 0, "ran_ms": 600027, "backend": "nccl"})
    ],
    "2024_rethrow_names_the_pg.txt": [
        (WATCHDOG_TIMEOUT, 2, {"seq": 1, "op": "BROADCAST", "pg_id": 0, "pg_name": "default_pg", "pg_rank": 2})
    ],
    "2025_heartbeat_and_rethrow.txt": [
        (WATCHDOG_TIMEOUT, 7, {"monitor": "heartbeat", "timeout_ms": 480000, "pg_id": 0, "pg_name": "default_pg"}),
        (WATCHDOG_TIMEOUT, 2, {"seq": 120049, "op": "_ALLGATHER_BASE", "numel_out": 131072000, "ran_ms": 1800065}),
        (WATCHDOG_TIMEOUT, 5, {"monitor": "heartbeat", "timeout_ms": 480000, "pg_rank": 5}),
        # C++'s terminate message has no torchrun prefix: only the process group's rank says whose it is
        (WATCHDOG_TIMEOUT, None, {"seq": 120049, "pg_rank": 7, "pg_id": 0, "ran_ms": 1800029}),
    ],
    "2025_heartbeat_wrapped_120_columns.txt": [  # a wrapped line's end, without a prefix, is read with its start's
        (WATCHDOG_TIMEOUT, 6, {"monitor": "heartbeat", "timeout_ms": 480000})
    ],
    "2020_gloo_recv_timeout_traceback.txt": [  # a timeout's traceback is the timeout, not a crash of its own
        (WATCHDOG_TIMEOUT, None, {"backend": "gloo", "op": "recv", "timeout_ms": 1800000})
    ],
    "2024_gloo_glued_then_nccl_sigterm.txt": [
        (WATCHDOG_TIMEOUT, None, {"backend": "gloo", "op": "send", "timeout_ms": 1800000}),
        (WATCHDOG_TIMEOUT, None, {"backend": "gloo", "op": "recv", "timeout_ms": 1800000}),
        (WATCHDOG_TIMEOUT, 0, {"backend": "nccl", "seq": 40402014, "numel_in": 513, "numel_out": 2052}),
    ],
    "2024_ib_status12_vendor129.txt": [  # the second line is the same connection's same error
        (TRANSPORT_ERROR, None, {"transport": "IB", "error": 12, "vendor_err": 129, "peer": "10.216.210.236<54862>"}),
        (TRANSPORT_ERROR, None, {"transport": "IB", "error": 12, "vendor_err": 129, "peer": "10.216.210.236<49892>"}),
    ],
    "2023_ib_error4_service_thread_noise.txt": [
        (TRANSPORT_ERROR, None, {"transport": "IB", "error": 4, "opcode": 5327, "len": 5327, "vendor_err": 81})
    ],
    "2023_ib_error4_ipv6_three_hosts.txt": [
        (TRANSPORT_ERROR, None, {"transport": "IB", "error": 4, "vendor_err": 81, "peer": peer, "direction": "Send"})
        for peer in (
            "fe80::966d:ae03:8b:df78%ib0<53249>",
            "fe80::966d:ae03:8b:df50%ib0<44413>",
            "fe80::966d:ae03:9c:f5f8%ib0<39391>",
        )
    ],
    "2023_ib_in_flattened_what.txt": [
        (TRANSPORT_ERROR, None, {"transport": "IB", "error": 12, "vendor_err": 129, "nccl_error": "ncclRemoteError"})
    ],
    "2023_ib_async_port_error.txt": [(TRANSPORT_ERROR, None, {"transport": "IB", "event": "port error"})],
    "2023_socket_broken_pipe_then_closed.txt": [  # the proxy's failed connect names its peer rank
        (TRANSPORT_ERROR, None, {"transport": "Socket", "error": "Broken pipe", "peer": "10.200.84.247<58355>"}),
        (TRANSPORT_ERROR, None, {"transport": "Socket", "peer_rank": 9}),
        (TRANSPORT_ERROR, None, {"transport": "Socket", "error": "Connection closed by remote peer"}),
    ],
    "2023_socket_progress_closed.txt": [
        (
            TRANSPORT_ERROR,
            None,
            {"error": "Connection closed by remote peer", "peer": "gpu004.ds-a4-r02.abc.com<55693>"},
        )
    ],
    "2025_socket_reset_k8s_stamps.txt": [
        (TRANSPORT_ERROR, None, {"transport": "Socket", "error": "Connection reset by peer", "op": "send"})
    ],
    "2026_remote_error_last_error_socket.txt": [
        (TRANSPORT_ERROR, None, {"error": "Connection reset by peer", "nccl_error": "ncclRemoteError", "op": "recv"})
    ],
    "2024_internal_error_last_error_closed.txt": [  # the excerpt ends inside a traceback: its process was dying
        (TRANSPORT_ERROR, None, {"error": "Connection closed by remote peer", "peer": "user<50260>"}),
        (TRANSPORT_ERROR, None, {"error": "Connection closed by remote peer", "peer": "user<43236>"}),
        (PROCESS_FAILED, None, {"cut": True, "function": "fit"}),
    ],
    "2024_gloo_pair_closed_and_reset.txt": [
        (TRANSPORT_ERROR, None, {"backend": "gloo", "error": "Connection closed by peer", "peer": "127.0.0.1:10895"}),
        (
            TRANSPORT_ERROR,
            None,
            {"backend": "gloo", "error": "Connection reset by peer", "peer": "192.168.70.92:25266"},
        ),
    ],
    "2023_gloo_closed_traceback.txt": [  # the transport failed, and the process died of it: both are told
        (TRANSPORT_ERROR, None, {"transport": "TCP", "backend": "gloo", "peer": "172.28.0.12:43185"}),
        (PROCESS_FAILED, None, {"exception": "RuntimeError", "frames": 6, "line": 1295, "function": "send"}),
    ],
    "2025_oom_torch25_chained.txt": [  # the traceback's head and its chained successor are cut in the paste
        (CUDA_OOM, None, {"requested_bytes": round(22.78 * GIB), "total_bytes": round(31.47 * GIB)})
    ],
    "2024_oom_torch21_capacty.txt": [
        (CUDA_OOM, None, {"requested_bytes": 496 * 2**20, "free_bytes": round(235.06 * 2**20)})
    ],
    "2019_2023_oom_older_forms.txt": [
        (CUDA_OOM, None, {"requested_bytes": 2**20, "free_bytes": 576 * 2**10, "reserved_bytes": round(30.96 * 2**20)}),
        (CUDA_OOM, None, {"requested_bytes": round(2.26 * GIB), "reserved_bytes": round(1.24 * GIB)}),
        (CUDA_OOM, None, {"total_bytes": round(14.76 * GIB), "allocated_bytes": round(8.77 * GIB)}),
        (CUDA_OOM, None, {"requested_bytes": 786 * 2**20, "reserved_bytes": round(38.78 * GIB)}),
    ],
    "2025_oom_rank1_gpu1_nothing_free.txt": [
        (
            CUDA_OOM,
            1,
            {"free_bytes": 0, "allocated_bytes": round(55.85 * GIB), "reserved_unallocated_bytes": round(3.64 * GIB)},
        )
    ],
    "2025_oom_rank2_gpu0_other_processes.txt": [(CUDA_OOM, 2, {"in_use_bytes": round(4.41 * GIB)})],
    "2025_oom_traceback_frames_elided.txt": [  # an OOM that ends a traceback: the allocation, and the crash
        (CUDA_OOM, 0, {"requested_bytes": round(3.21 * GIB)}),
        (PROCESS_FAILED, 0, {"exception": "torch.OutOfMemoryError", "error": "CUDA out of memory", "frames": 0}),
    ],
    "2025_fsdp_valueerror_then_oom_tracebacks.txt": [
        (PROCESS_FAILED, 0, {"exception": "ValueError", "frames": 15, "function": "_validate_tensors_to_flatten"}),
        (CUDA_OOM, 0, {"requested_bytes": round(14.14 * GIB)}),
        (
            PROCESS_FAILED,
            0,
            {"exception": "torch.OutOfMemoryError", "frames": 16, "line": 864, "function": "flatten_tensors"},
        ),
    ],
    "2023_ignored_at_exit_then_spawn_child.txt": [  # a destructor's at exit is no crash; the child's was cut off
        (PROCESS_FAILED, None, {"exception": "torch.multiprocessing.spawn.ProcessRaisedException", "process": 0})
    ],
    "2025_agent_glog_spawn_traceback.txt": [  # every line behind the agent logger's glog prefix
        (PROCESS_FAILED, None, {"exception": "torch.multiprocessing.spawn.ProcessRaisedException", "frames": 2})
    ],
    "2022_import_error_traceback.txt": [
        (PROCESS_FAILED, None, {"exception": "ImportError", "frames": 3, "line": 202, "function": "<module>"})
    ],
    "2021_report_root_cause_first_msg_json.txt": [  # PyTorch 1.9's table: the error file's JSON names the exception
        (
            PROCESS_FAILED,
            0,
            {"exit_code": 1, "pid": 8045, "exception": "ValueError", "error": "Test", "root_cause": True},
        )
    ],
    "2023_two_node_reports.txt": [
        (PROCESS_FAILED, 3, {"exit_code": 1, "pid": 19418, "local_rank": 3, "root_cause": False}),
        (PROCESS_FAILED, 0, {"exit_code": 1, "pid": 19414, "root_cause": True, "host": "gpu187.cluster.local"}),
        (PROCESS_FAILED, 4, {"exit_code": 1, "pid": 19401, "local_rank": 0, "root_cause": True}),
    ],
    "2024_report_head_cut.txt": [  # rank 1's entry lost its [1]: header in the paste
        (PROCESS_FAILED, rank, {"exit_code": 1, "pid": pid}) for rank, pid in ((2, 69813), (3, 69814), (0, 69811))
    ],
    "2026_agent_line_then_sigabrt_root_cause.txt": [  # the agent's line and the table's entry: one failure
        (PROCESS_FAILED, 6, {"exit_code": -6, "pid": 1246013, "signal": "SIGABRT", "local_rank": 6})
    ],
    "2025_agent_line_launcher_traceback_cut.txt": [  # no table came: the agent's own line, at the end
        (PROCESS_FAILED, None, {"exit_code": 1, "pid": 33054, "local_rank": 3}),
        # its bar drawn when the job closed, 22 s after it began, never stepping: a silence (too short for a stall)
        (PROGRESS_GAP, None, {"gap_s": 22.0, "phase": "start", "last_step": 0}),
    ],
    "2025_launcher_traceback_then_report.txt": [  # the launcher's ChildFailedError is no crash of its own
        (PROCESS_FAILED, 0, {"exit_code": 1, "pid": 11377, "host": "192-222-55-138", "root_cause": True})
    ],
    "2026_xid45_after_xid149.txt": [
        (DRIVER_XID, None, {"xid": 45, "pci": pci, "name": "python3"})
        for pci in (
            "0000:dc:00",
            "0000:ed:00",
            "0000:ba:00",
            "0000:97:00",
            "0000:dc:00",
            "0000:ba:00",
            "0000:ed:00",
            "0000:97:00",
        )
    ],
    "2025_fallen_off_bus_with_and_without_xid.txt": [  # the probe's message (its address a line above), then the XID
        (GPU_FAULT, None, {"fault": "GPU has fallen off the bus"}),
        (DRIVER_XID, None, {"xid": 79, "pci": "0000:44:00", "text": "GPU has fallen off the bus"}),
    ],
}


def test_every_fixture_has_its_expectation_and_its_source_cited():
    assert sorted(EXPECTED) == sorted(p.name for p in FAILURES.glob("*.txt"))
    sources = (FIXTURES / "SOURCES.md").read_text()
    assert all(f"`failures/{name}`" in sources for name in EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_fixture_tells_its_failures_with_their_kind_rank_and_details(name):
    events = read(name)
    expected = EXPECTED[name]
    assert told(events) == [(kind, rank) for kind, rank, _ in expected]
    for event, (_, _, details) in zip(events, expected, strict=True):
        assert {k: event.details.get(k) for k in details} == details, event.message
        assert event.source == name and event.line is not None and event.message


def test_gpu_index_is_the_gpu_the_oom_message_names_not_the_rank():
    [rank1] = read("2025_oom_rank1_gpu1_nothing_free.txt")
    [rank2] = read("2025_oom_rank2_gpu0_other_processes.txt")
    assert (rank1.rank, rank1.gpu_index) == (1, 1) and (rank2.rank, rank2.gpu_index) == (2, 0)
    assert [e.gpu_index for e in read("2019_2023_oom_older_forms.txt")] == [0, 0, 0, 0]


def test_the_process_group_rank_is_kept_apart_from_the_global_rank():
    events = read("2025_seqs_disagree_collector_stamp.txt")
    assert [(e.rank, e.details["pg_rank"], e.details["seq"]) for e in events] == [(13, 1, 216), (15, 1, 57)]
    assert events[0].ts == 1739883240.0  # the collector's stamp (no seconds) is the line's time


def test_disagreeing_sequence_numbers_let_the_detector_name_the_rank_behind():
    events = read("2025_seqs_disagree_collector_stamp.txt") + read("2024_ops_disagree_same_seq.txt")
    assert {e.rank: (e.details["op"], e.details["seq"]) for e in events} == {
        13: ("ALLTOALL_BASE", 216),
        15: ("ALLREDUCE", 57),
        7: ("BROADCAST", 80078),
        3: ("ALLREDUCE", 80078),
    }

    def frame(t: float):
        now = [replace(e, ts=T0 + t) for e in events] if t == 5 else []
        return replace(job(t, training={"global_step": 100}), events=tuple(now))

    [signal] = Harness(CollectiveTimeout()).run(range(8), frame).active()
    assert signal.evidence["behind_ranks"] == [15]
    assert signal.evidence["seq_by_rank"] == {"3": 80078, "7": 80078, "13": 216, "15": 57}
    assert signal.subject == {"ranks": (3, 7, 13, 15)}


def test_a_multi_line_report_quotes_its_own_line_and_is_told_where_it_ended():
    [crash] = read("2022_import_error_traceback.txt")
    assert crash.message == "ImportError: libtorch_cuda.so: failed to map segment from shared object"
    assert crash.line == 11  # the end of the file: nothing after the exception said whether a chain follows
    [entry] = read("2026_agent_line_then_sigabrt_root_cause.txt")
    assert entry.message.startswith("time      : 2026-08-13_08:21:19 | host      : zkrh-58 | rank      : 6")
    assert "traceback : Signal 6 (SIGABRT) received by PID 1246013" in entry.message


def test_a_chained_traceback_is_told_once_by_its_last_exception():
    # Two real tracebacks joined by CPython's own chaining sentence (Lib/traceback.py, _context_message).
    lines = (FAILURES / "2025_fsdp_valueerror_then_oom_tracebacks.txt").read_text().splitlines()
    first, second = lines[:38], lines[38:]
    chained = [*first, "", "During handling of the above exception, another exception occurred:", "", *second]
    scanner = FailureScanner()
    out = [f for text in chained for f in scanner.feed(split_prefixes(text)[2]) or ()] + scanner.flush()
    assert [(f.kind, f.details.get("exception")) for f in out] == [
        (CUDA_OOM, None),
        (PROCESS_FAILED, "torch.OutOfMemoryError"),
    ]


def test_a_traceback_a_paste_indented_whole_ends_at_its_exception_left_of_its_frames():
    # The same real traceback as a Markdown code block or a reply quotes it: every line four blanks in
    lines = (FAILURES / "2025_fsdp_valueerror_then_oom_tracebacks.txt").read_text().splitlines()[:38]
    scanner = FailureScanner()
    told = [f for text in lines for f in scanner.feed("    " + split_prefixes(text)[2]) or ()] + scanner.flush()
    assert [(f.kind, f.details.get("exception")) for f in told] == [(PROCESS_FAILED, "ValueError")]
    # Lightning's paste (the corpus's train split): ``  RuntimeError: NCCL error … invalid usage`` left of its
    # four-blank frames is the crash, told before the Broken pipe lines that follow it
    kinds = [e.kind for e in read_excerpt("lightning_rank_crashed-ddp-gpus-subset-nccl-invalid-usage.log")
             if isinstance(e, LogEvent)]  # fmt: skip
    assert kinds[0] == PROCESS_FAILED and TRANSPORT_ERROR in kinds


def test_a_spawned_child_s_traceback_replaces_its_parent_s_re_raise():
    # The parent's re-raise from vits_chinese#88, then a real child traceback in its place (the paste cut the child's).
    parent = (FAILURES / "2023_ignored_at_exit_then_spawn_child.txt").read_text().splitlines()[7:21]
    child = (FAILURES / "2025_fsdp_valueerror_then_oom_tracebacks.txt").read_text().splitlines()[:38]
    scanner = FailureScanner()
    out = [f for text in parent + child for f in scanner.feed(split_prefixes(text)[2]) or ()] + scanner.flush()
    assert [(f.kind, f.details["exception"], f.details["process"], f.details["frames"]) for f in out] == [
        (PROCESS_FAILED, "ValueError", 0, 15)
    ]


def test_the_heartbeat_monitor_s_first_line_is_a_timeout_too():
    # The text ProcessGroupNCCL's heartbeatMonitor logs first (code index 64170360, PyTorch 2.2).
    line = (
        "[rank3]:[E1203 10:00:00.000000000 ProcessGroupNCCL.cpp:1190] [PG 0 Rank 3] Heartbeat monitor timed out! "
        "Process will be terminated after dumping debug info. workMetaList_.size()=2"
    )
    [failure] = FailureScanner().feed(split_prefixes(line)[2]) or []
    assert failure.kind == WATCHDOG_TIMEOUT
    assert failure.details == {"backend": "nccl", "monitor": "heartbeat", "pg_id": 0, "pg_rank": 3, "pending_works": 2}


def test_nccl_s_fatal_line_after_a_timeout_is_its_echo_and_alone_is_a_timeout():
    fatal = (
        "[rank6]:[F429 14:03:49.385461578 ProcessGroupNCCL.cpp:1554] [PG ID 0 PG GUID 0(default_pg) Rank 6] "
        "Terminating the process after attempting to dump debug info, due to collective timeout or exception."
    )
    scanner = FailureScanner()
    [alone] = scanner.feed(split_prefixes(fatal)[2]) or []
    assert alone.details["fatal"] is True and alone.details["cause"] == "timeout" and alone.details["pg_rank"] == 6
    assert scanner.feed(split_prefixes(fatal)[2]) == []


def test_noise_tells_nothing_and_costs_little():
    noise = (FIXTURES / "noise" / "nccl_info_2022.txt").read_text().splitlines()
    frameworks = [
        p for d in ("megatron", "deepspeed", "huggingface", "lightning", "torchtitan") for p in (FIXTURES / d).iterdir()
    ]
    lines = noise + [text for path in frameworks for text in path.read_text().splitlines()]
    assert not any(
        FailureScanner().feed(split_prefixes(text)[2]) for text in lines
    )  # nothing in every framework's lines
    many = (lines * (50_000 // len(lines) + 1))[:50_000]
    scanner = FailureScanner()
    started = time.perf_counter()
    for text in many:
        scanner.feed(text)
    assert time.perf_counter() - started < 2.5  # ≥ 20,000 lines/s even on a loaded CI core (measured: ~300,000)


def test_launchers_labels_before_the_rank_prefix_and_glog_prefixes_are_cut():
    assert split_prefixes('worker-5: [rank22]:   File "x.py", line 3, in main')[:2] == (22, None)
    assert split_prefixes("(WorkerDict pid=231421) [rank1]:[E314 14:33:45.172185860 x.cpp:1]")[0] == 1
    assert split_prefixes(" 2025-02-18 12:54 [rank13]:[E218 x]")[:2] == (13, 1739883240.0)
    assert split_prefixes("RuntimeError: [rank1]: no")[0] is None
    glog = "I1028 12:13:38.405081 632355 ProcessGroupNCCL.cpp:843] [Rank 0] NCCL watchdog thread started!"
    assert split_prefixes(glog) == (None, None, glog)  # glog has no year
    assert split_glog(glog) == ("I", "[Rank 0] NCCL watchdog thread started!")


def test_one_xid_parser_serves_the_kernel_log_and_the_log_reader():
    assert kmsg.parse_xid_line is logs_xid.parse_xid_line
    line = "[1043211.552716] NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, name=python, GPU has fallen off the bus."
    assert kmsg.parse_xid_line(line) == ((0, 0x3B, 0), 79)
    assert logs_xid.xid_details(line) == {
        "xid": 79, "pci": "0000:3b:00", "pid": 48213, "name": "python", "text": "GPU has fallen off the bus."
    }  # fmt: skip
    assert logs_xid.xid_details("nvidia-nvswitch1: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 30") is None


def test_every_rank_whose_watchdog_fired_is_in_the_timeout_s_evidence_as_its_lines_come():
    """The train split's axolotl excerpt: rank 1's watchdog line glued after a bar (whose step time moves the
    clock), then ranks 6, 5 and 7 a tick later. The signal keeps its first subject; its evidence names all four."""
    last: dict[str, Any] = {}

    def watch(step) -> None:
        for s in step.diagnosis.signals:
            if s.name == "collective_timeout":
                last.update(subject=s.subject, ranks=s.evidence.get("ranks"))

    replay_logs(
        [str(TRAIN / "axolotl_collective_timeout_qwen-moe-allreduce-watchdog.log")], Settings(), on_result=watch
    )
    assert last == {"subject": {"ranks": (1,)}, "ranks": [1, 5, 6, 7]}
