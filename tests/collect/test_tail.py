"""The tailer alone, on real files: where it starts, new files, rotation, partial lines, its bounds."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tests.collect.tailing import Clock, write
from trainpulse_otel.collect.tail import Limits, Tailer, TailLine


def tailer(*patterns: Path | str, clock: Clock | None = None, **limits: int | float) -> Tailer:
    return Tailer([str(p) for p in patterns], Limits(**limits), clock or Clock())


def texts(lines: list[TailLine]) -> list[str]:
    return [line.text for line in lines]


def test_a_file_there_at_start_is_read_from_its_end_and_its_lines_keep_their_numbers(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("old 1\nold 2\n")
    tail = tailer(log)
    assert tail.poll().lines == []
    write(log, "new 3\nnew 4\n")
    assert tail.poll().lines == [TailLine(str(log), 3, "new 3"), TailLine(str(log), 4, "new 4")]


def test_a_line_being_written_at_start_is_read_whole(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("old\n iteration 5/ 10 | lm lo")
    tail = tailer(log)
    assert tail.poll().lines == []
    write(log, "ss: 1.0 |\n")
    assert tail.poll().lines == [TailLine(str(log), 2, " iteration 5/ 10 | lm loss: 1.0 |")]


def test_a_file_that_appears_later_is_read_from_its_start(tmp_path):
    clock = Clock()
    tail = tailer(tmp_path / "*.log", clock=clock, glob_every_s=2.0)
    assert tail.poll().lines == []
    write(tmp_path / "rank3.log", "a\nb\n")
    clock.now += 2.0
    assert tail.poll().lines == [
        TailLine(str(tmp_path / "rank3.log"), 1, "a"),
        TailLine(str(tmp_path / "rank3.log"), 2, "b"),
    ]


def test_rotation_by_rename_reads_the_old_file_to_its_end_then_the_new_one_from_its_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    tail = tailer(log)
    tail.poll()
    with log.open("a") as writer:  # the job's open file: it writes on after the rename
        writer.write("one\n")
        writer.flush()
        assert texts(tail.poll().lines) == ["one"]
        os.rename(log, tmp_path / "train.log.1")
        writer.write("two, still to the old file\n")
    write(log, "three, the new file\n")
    lines = tail.poll().lines
    assert texts(lines) == ["two, still to the old file", "three, the new file"]
    assert [line.number for line in lines] == [2, 1]


def test_a_rotated_copy_that_a_glob_also_matches_is_not_read_again(tmp_path):
    clock = Clock()
    log = tmp_path / "train.log"
    log.write_text("")
    tail = tailer(tmp_path / "train.log*", clock=clock)
    tail.poll()
    write(log, "one\n")
    assert texts(tail.poll().lines) == ["one"]
    os.rename(log, tmp_path / "train.log.1")
    write(log, "two\n")
    seen = []
    for _ in range(4):
        clock.now += 2.0
        seen += texts(tail.poll().lines)
    write(tmp_path / "train.log.1", "late, to the old file\n")
    clock.now += 2.0
    seen += texts(tail.poll().lines)
    assert seen == ["two", "late, to the old file"]


def test_copy_and_truncate_reads_the_file_again_from_its_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    tail = tailer(log)
    tail.poll()
    write(log, "one\ntwo\n")
    assert texts(tail.poll().lines) == ["one", "two"]
    with log.open("r+") as fh:  # logrotate's copytruncate
        fh.truncate(0)
    write(log, "three\n")
    lines = tail.poll().lines
    assert texts(lines) == ["three"] and lines[0].number == 1


def test_a_last_line_waits_for_its_newline_and_after_a_quiet_second_is_taken_as_it_is(tmp_path):
    clock = Clock()
    log = tmp_path / "train.log"
    log.write_text("")
    tail = tailer(log, clock=clock, quiet_s=1.0)
    tail.poll()
    write(log, "whole\nhalf")
    polled = tail.poll()
    assert texts(polled.lines) == ["whole"] and polled.quiet == []
    write(log, " and more")
    clock.now += 0.5
    assert tail.poll().lines == []
    clock.now += 0.6
    assert tail.poll().lines == []  # new bytes 0.6 s ago: not yet quiet
    clock.now += 1.0
    polled = tail.poll()
    assert texts(polled.lines) == ["half and more"] and polled.quiet == [str(log)]
    clock.now += 5.0
    assert tail.poll().quiet == []  # quiet once, not every poll after


def test_a_line_longer_than_the_limit_is_cut_and_the_next_line_is_whole(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    tail = tailer(log, max_line_bytes=10)
    tail.poll()
    write(log, "x" * 25)
    assert texts(tail.poll().lines) == ["x" * 10]
    write(log, "y" * 30 + "\nnext\n")
    assert texts(tail.poll().lines) == ["next"]


def test_one_chatty_file_cannot_starve_the_others(tmp_path):
    chatty, quiet = tmp_path / "a.log", tmp_path / "b.log"
    chatty.write_text("")
    quiet.write_text("")
    tail = tailer(tmp_path / "*.log", max_file_bytes=100, max_poll_bytes=150)
    tail.poll()
    write(chatty, "noise line\n" * 1000)
    write(quiet, "the one that matters\n")
    seen: list[str] = []
    for _ in range(3):
        seen += texts(tail.poll().lines)
    assert "the one that matters" in seen and len(seen) < 40


def test_at_most_max_files_are_followed_the_newest_first(tmp_path, caplog):
    for n in range(5):
        path = tmp_path / f"rank{n}.log"
        path.write_text("")
        os.utime(path, (1000 + n, 1000 + n))
    caplog.set_level(logging.WARNING, "trainpulse_otel.collect.tail")
    tail = tailer(tmp_path / "*.log", max_files=2)
    tail.poll()
    assert sorted(Path(p).name for p in tail.paths) == ["rank3.log", "rank4.log"]
    tail.poll()
    assert sum("more than" in r.message for r in caplog.records) == 1
    tail.close()


def test_a_missing_path_is_logged_once_and_read_from_its_start_when_it_appears(tmp_path, caplog):
    clock = Clock()
    log = tmp_path / "later.log"
    caplog.set_level(logging.WARNING, "trainpulse_otel.collect.tail")
    tail = tailer(log, clock=clock)
    for _ in range(5):
        assert tail.poll().lines == []
        clock.now += 2.0
    assert [r.message for r in caplog.records] == [f"follow: {log} matches no file yet; waiting"]
    log.write_text("first\n")
    assert texts(tail.poll().lines) == ["first"]


def test_a_removed_file_is_closed_and_a_large_file_s_lines_are_not_counted(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("x\n" * 100)
    tail = tailer(log, count_lines_up_to=50)
    tail.poll()
    write(log, "new\n")
    assert tail.poll().lines == [TailLine(str(log), None, "new")]
    fds = len(os.listdir("/proc/self/fd"))
    log.unlink()
    tail.poll()
    assert len(os.listdir("/proc/self/fd")) == fds - 1 and tail.paths == []
