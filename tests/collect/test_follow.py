"""The ``follow`` collector without a daemon: real files, the real reader, a clock of the test's."""

from __future__ import annotations

import math
from pathlib import Path

from tests.collect.follow_lines import MEGATRON, NAN_ITERATIONS, WATCHDOG
from tests.collect.tailing import Clock, write
from trainpulse_otel.collect.follow import FollowCollector
from trainpulse_otel.collect.tail import Limits
from trainpulse_otel.samples import WATCHDOG_TIMEOUT


class Counts:
    def __init__(self) -> None:
        self.calls: list[dict[str, int]] = []

    def __call__(self, **counts: int) -> None:
        self.calls.append(counts)

    def total(self, key: str) -> int:
        return sum(c[key] for c in self.calls)


def follower(tmp_path: Path, clock: Clock, on_read: Counts | None = None) -> FollowCollector:
    return FollowCollector([str(tmp_path / "*.log")], limits=Limits(quiet_s=1.0), clock=clock, on_read=on_read)


def test_an_iteration_is_reported_when_the_next_begins_or_when_its_file_goes_quiet(tmp_path):
    clock, counts = Clock(), Counts()
    log = tmp_path / "train.log"
    log.write_text(MEGATRON[0] + "\n")  # history: not read
    follow = follower(tmp_path, clock, counts)
    assert follow.collect(100.0).reports is None
    write(log, MEGATRON[1] + "\n" + MEGATRON[2] + "\n")
    [first] = follow.collect(101.0).reports  # iteration 45's line completes 44's
    assert first.global_step == 44 and first.loss == 1.875063 and first.timestamp == 101.0
    clock.now += 0.5
    assert follow.collect(101.5).reports is None  # 45 waits: its timer lines may follow
    clock.now += 1.0
    [second] = follow.collect(102.5).reports  # quiet for a second: 45 is complete
    assert second.global_step == 45 and second.timestamp == 101.0
    assert (counts.total("lines"), counts.total("reports"), counts.total("unknown")) == (2, 2, 0)
    follow.close()


def test_nan_iterations_appended_are_reports_with_a_nan_loss(tmp_path):
    clock = Clock()
    log = tmp_path / "train.log"
    log.write_text(NAN_ITERATIONS[0] + "\n")
    follow = follower(tmp_path, clock)
    follow.collect(100.0)
    write(log, "\n".join(NAN_ITERATIONS[1:]) + "\n")
    reports = list(follow.collect(101.0).reports)
    clock.now += 1.0
    reports += follow.collect(102.0).reports
    assert [r.global_step for r in reports] == [5427, 5428]
    assert all(math.isnan(r.loss) and math.isnan(r.grad_norm) for r in reports)
    follow.close()


def test_a_watchdog_line_is_an_event_naming_its_rank_file_and_line(tmp_path):
    clock = Clock()
    follow = follower(tmp_path, clock)
    follow.collect(100.0)
    log = tmp_path / "rank1.log"
    write(log, "NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n" + WATCHDOG + "\n")
    clock.now += 2.0  # the new file is found at the next look
    collected = follow.collect(102.0)
    [event] = collected.events
    assert event.kind == WATCHDOG_TIMEOUT and event.rank == 1 and event.ts == 102.0
    assert (event.source, event.line) == (str(log), 2)
    assert (event.details["op"], event.details["seq"]) == ("ALLREDUCE", 808) and event.message == WATCHDOG
    assert follow.reader.stats.unknown == 1
    follow.close()


def test_a_line_the_reader_fails_on_costs_that_line_only(tmp_path, monkeypatch):
    clock = Clock()
    follow = follower(tmp_path, clock)
    follow.collect(100.0)
    real = follow.reader.feed

    def fragile(line):
        if "boom" in line.text:
            raise RuntimeError("a parser's bug")
        return real(line)

    monkeypatch.setattr(follow.reader, "feed", fragile)
    write(tmp_path / "rank0.log", "boom\n" + WATCHDOG + "\n")
    clock.now += 2.0
    assert [e.kind for e in follow.collect(102.0).events] == [WATCHDOG_TIMEOUT]
