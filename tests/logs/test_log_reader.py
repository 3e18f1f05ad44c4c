"""The log reader itself: streams, time, repeated iterations, what it cannot read."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.logs.lines import WATCHDOG, iteration
from trainpulse_otel.logs import LogLine, LogReader, rank_of_source, split_prefixes
from trainpulse_otel.samples import LogEvent, TrainingSample


def read(reader: LogReader, *lines: LogLine) -> list[TrainingSample | LogEvent]:
    return [item for line in lines for item in reader.feed(line)] + reader.flush()


def test_a_line_s_own_time_stamp_is_its_time_and_an_iteration_is_complete_when_the_next_begins():
    reader = LogReader()
    first = LogLine(iteration(10, "[2024-05-01 10:00:00] "), "train.log", 1)
    second = LogLine(iteration(20, "[2024-05-01 10:00:05] "), "train.log", 2)
    assert reader.feed(first) == []  # held: the timers after it may follow
    [report] = reader.feed(second)
    assert report.global_step == 10 and report.timestamp == 1714557600.0 and report.loss == pytest.approx(7.1)
    [last] = reader.flush()
    assert last.global_step == 20 and last.timestamp == 1714557605.0


def test_without_time_stamps_time_advances_by_the_steps_reported():
    reader = LogReader(start=1000.0)
    reports = read(
        reader, *(LogLine(iteration(step, ms=2000.0), "train.log", n) for n, step in enumerate((5, 10, 11), 1))
    )
    assert [r.timestamp for r in reports] == [1002.0, 1012.0, 1014.0]  # one step, then 5 steps, then 1, of 2 s


def test_arrival_time_wins_over_a_line_s_own_stamp():
    reader = LogReader()
    reports = read(reader, LogLine(iteration(7, "[2024-05-01 10:00:00] "), "train.log", 1, ts=5000.0))
    assert [r.timestamp for r in reports] == [5000.0]


def test_each_rank_prefix_is_its_own_stream_and_a_step_already_reported_is_reported_once():
    reader = LogReader(start=0.0)
    lines = [LogLine(f"[rank{r}]:" + iteration(step), "all.log", n) for n, (step, r) in enumerate(
        [(10, 0), (10, 1), (20, 0), (20, 1)], 1)]  # fmt: skip
    reports = read(reader, *lines)
    assert sorted(r.global_step for r in reports) == [10, 20]
    assert reader.stats.repeated == 2 and reader.stats.reports == 2


def test_a_failure_line_is_an_event_of_its_stream_s_rank_and_says_where_it_was():
    reader = LogReader(start=100.0)
    [event] = read(reader, LogLine(WATCHDOG, "/logs/job-1234-3.out", 42, node="node-007"))
    assert isinstance(event, LogEvent) and event.kind == "watchdog_timeout"
    assert event.rank == 3 and event.hostname == "node-007" and event.where() == "/logs/job-1234-3.out:42"
    assert event.details["seq"] == 88 and event.details["pg_rank"] == 3 and event.ts == 100.0


def test_a_line_nobody_understands_is_counted_and_a_bad_value_costs_its_field_not_the_report():
    reader = LogReader()
    assert read(reader, LogLine("NCCL INFO Channel 00/32 : 0 1 2 3", "x.log", 1)) == []
    negative = iteration(3).replace("elapsed time per iteration (ms): 500.0", "elapsed time per iteration (ms): -5.0")
    [report] = read(reader, LogLine(negative, "y.log", 1))
    assert report.global_step == 3 and report.step_time_ms is None and report.loss is not None
    assert report.samples_per_sec is None  # derived from that step time: it goes with it
    assert reader.stats.unknown == 1 and reader.stats.invalid_fields == 2 and reader.stats.invalid == 0


def test_a_nan_loss_on_an_iteration_line_is_read_as_nan():
    reader = LogReader()
    [report] = read(reader, LogLine(iteration(9, loss="NAN"), "train.log", 1))
    assert math.isnan(report.loss)


def test_a_framework_named_that_does_not_exist_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown framework 'megatorn'; known: "):
        LogReader("megatorn")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[rank3]: step 1", (3, None, "step 1")),
        ("[default12]:hello", (12, None, "hello")),
        ("[2024-05-01 10:00:00.500000] iteration", (None, 1714557600.5, "iteration")),
        ("2024-05-01T10:00:00Z [rank1]: x", (1, 1714557600.0, "x")),
        ("2024-05-01 12:00:00+02:00 x", (None, 1714557600.0, "x")),
        ("no prefix at all", (None, None, "no prefix at all")),
        # the CRI format kubelet writes to /var/log/pods (kubernetes pkg/kubelet/kuberuntime/logs: "2016-10-06T00:17:09
        # .669794202Z stdout F log content"): the stream and tag are cut, a torchrun prefix after them read
        ("2016-10-06T00:17:09.669794202Z stdout F [rank3]:x", (3, 1475713029.669794, "x")),
        (
            "2016-10-06T00:17:09.669794202Z stderr P part of a long line",
            (None, 1475713029.669794, "part of a long line"),
        ),
    ],
)
def test_prefixes_give_the_rank_and_the_time(text, expected):
    assert split_prefixes(text) == expected


@pytest.mark.parametrize(
    ("path", "rank"),
    [("rank3.log", 3), ("/x/node0_rank_12.out", 12), ("slurm-4567-5.out", 5), ("/logs/attempt_0/2/stdout.log", 2),
     ("train.log", None), ("slurm-4567.out", None), (None, None)],
)  # fmt: skip
def test_a_file_name_may_say_the_rank(path, rank):
    assert rank_of_source(path) == rank


def test_a_quiet_file_is_flushed_alone_and_a_busy_one_keeps_its_held_iteration():
    reader = LogReader()
    reader.feed(LogLine(iteration(10, "[2024-05-01 10:00:00] "), "a.log", 1))
    reader.feed(LogLine(iteration(30, "[2024-05-01 10:00:00] "), "b.log", 1))
    [report] = reader.flush(["a.log"])
    assert report.global_step == 10  # b.log's iteration may still get its timer lines
    [report] = reader.flush()
    assert report.global_step == 30


def test_a_stream_is_flushed_after_one_period_without_lines_not_while_lines_come():
    reader = LogReader()
    reader.feed(LogLine(iteration(10, "[2024-05-01 10:00:00] "), "a.log", 1))
    assert reader.flush_quiet() == []  # a line came in this period
    [report] = reader.flush_quiet()  # none in the next: what it holds is complete
    assert report.global_step == 10
    assert reader.flush_quiet() == []  # flushed once, not every quiet period


def test_streams_beyond_the_cap_are_flushed_and_forgotten_longest_quiet_first(monkeypatch):
    monkeypatch.setattr("trainpulse_otel.logs.reader.MAX_STREAMS", 2)
    reader = LogReader()
    reader.feed(LogLine(iteration(10, "[2024-05-01 10:00:00] "), "old.log", 1))
    reader.flush_quiet()
    reader.flush_quiet()  # old.log quiet for two periods
    reader.feed(LogLine(WATCHDOG, "b.log", 1))
    reader.feed(LogLine(WATCHDOG, "c.log", 1))
    reader.flush_quiet()
    assert reader.sources == {"b.log", "c.log"}


def test_a_framework_that_prints_no_step_time_gets_the_one_its_lines_stamps_give():
    # torchtitan prints no step time; its logger stamps every line (tests/fixtures/logs/torchtitan, PR #3393)
    lines = (Path(__file__).parents[1] / "fixtures/logs/torchtitan/2026_rank_prefixed.log").read_text().splitlines()
    reports = read(LogReader(), *(LogLine(text, "train.log", n) for n, text in enumerate(lines, 1)))
    assert reports[0].step_time_ms is None  # nothing before it to measure from
    assert [round(r.step_time_ms) for r in reports[1:]] == [1118, 1121, 1125, 1119]  # 16:04:46,338 → 47,456 …
    followed = LogReader()  # a followed line's time is when it was read: no step time is made up from that
    reports = read(followed, *(LogLine(text, "train.log", n, ts=100.0 + n) for n, text in enumerate(lines, 1)))
    assert all(r.step_time_ms is None for r in reports)
