"""Flight Recorder dumps read safely and compared: the ranks missing from the first collective not all joined.

The dumps are real torch's: a one-rank gloo job in a subprocess writes what ``_dump_fr_trace()`` and
``_dump_fr_trace_json()`` return (the bytes ProcessGroupNCCL's dump on timeout writes to ``PREFIX<rank>``).
Several ranks' dumps are that real dump's data with their entries cut as a hung job's would be; the real
multi-rank job is tests/integrations/flight_recorder.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.exports.receivers import free_port
from trainpulse_otel.cli import main
from trainpulse_otel.collect.flight_dumps import SCAN_S, FlightRecorderCollector, is_dump
from trainpulse_otel.logs import flight_recorder
from trainpulse_otel.logs.flight_analysis import analyse, details, events, message, ranges, when
from trainpulse_otel.logs.flight_recorder import DumpError, parse_dump, rank_of
from trainpulse_otel.samples import WATCHDOG_TIMEOUT, parse_log_event

#: A real torch process writes the dumps (not imported here: the quick tier collects this module and leaves it out).
pytestmark = [
    pytest.mark.jobs,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"),
]

#: One rank, four all-reduces, its dump written both ways.
ONE_RANK_JOB = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
grads = torch.ones(16, 4)
for _ in range(4):
    dist.all_reduce(grads)
open(sys.argv[2] + "pickle_rank_0", "wb").write(torch._C._distributed_c10d._dump_fr_trace())
open(sys.argv[2] + "json_rank_0", "wb").write(torch._C._distributed_c10d._dump_fr_trace_json())
"""


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> Path:
    """The directory holding the real dumps ``pickle_rank_0`` and ``json_rank_0``."""
    out = tmp_path_factory.mktemp("fr")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    (out / "job.py").write_text(ONE_RANK_JOB)
    subprocess.run([sys.executable, str(out / "job.py"), str(free_port()), f"{out}/"], check=True, env=env, timeout=120)
    return out


def raw(real: Path) -> dict[str, Any]:
    return dict(flight_recorder.load((real / "pickle_rank_0").read_bytes(), "pickle_rank_0"))


def job(real: Path, world: int, cut: dict[int, int], first: dict[int, int] | None = None) -> list[bytes]:
    """``world`` ranks' dumps from the real one: rank r's entries without its last ``cut[r]`` (it never called
    them) and before ``first[r]`` (its ring buffer dropped them); every rank in the group."""
    base = raw(real)
    dumps = []
    for rank in range(world):
        data = copy.deepcopy(base)
        data["pg_config"] = {k: {**v, "ranks": str(list(range(world)))} for k, v in data["pg_config"].items()}
        entries = data["entries"][(first or {}).get(rank, 0) :]
        data["entries"] = entries[: len(entries) - cut.get(rank, 0)]
        dumps.append(pickle.dumps(data, protocol=2))
    return dumps


def parsed(blobs: list[bytes]):
    return [parse_dump(b, f"/fr/rank_{r}", r) for r, b in enumerate(blobs)]


def test_a_real_dump_parses_to_its_collectives_pickle_and_json_alike(real):
    pickled = parse_dump((real / "pickle_rank_0").read_bytes(), "pickle_rank_0", 0)
    as_json = parse_dump((real / "json_rank_0").read_bytes(), "json_rank_0", 0)
    for dump in (pickled, as_json):
        assert [e.seq for e in dump.entries] == [1, 2, 3, 4]
        assert {e.op for e in dump.entries} == {"gloo:all_reduce"} and not any(e.p2p for e in dump.entries)
        assert {(e.pg_name, e.pg_desc) for e in dump.entries} == {("0", "default_pg")}
        assert dump.entries[0].input_sizes == ((16, 4),) and dump.entries[0].created_ns > 0
        assert dump.version and dump.groups  # torch's pg_config: the group and its ranks
    assert pickled.entries[-1].call_site == f"{real / 'job.py'}:6 (<module>)"  # the job's line, torch's skipped
    assert rank_of("/fr/rank_12", "/fr/rank_") == 12 and rank_of("/fr/rank_x", "/fr/rank_") is None


def test_the_rank_that_never_called_the_collective_is_named(real):
    found = analyse(parsed(job(real, 3, cut={2: 1})))
    assert len(found) == 1
    m = found[0]
    assert (m.op_name, m.seq, m.pg_desc, m.backend) == ("all_reduce", 4, "default_pg", "gloo")
    assert m.missing == (2,) and m.joined == (0, 1) and m.group == (0, 1, 2) and not m.no_dump
    assert set(m.states) == {0, 1}
    d = details(m)
    assert d["missing_ranks"] == [2] and d["numel_in"] == 64 and d["flight_recorder"] is True
    assert "rank(s) 2 never joined it" in message(m) and "rank(s) 0-1" in message(m)
    told = events(m, ts=100.0, sources={0: "/fr/rank_0", 1: "/fr/rank_1"})
    assert [(e.kind, e.rank, e.source) for e in told] == [
        (WATCHDOG_TIMEOUT, 0, "/fr/rank_0"),
        (WATCHDOG_TIMEOUT, 1, "/fr/rank_1"),
    ]
    assert parse_log_event(told[0].to_dict()) == told[0]  # flat details: a trace keeps them
    assert when(m) > m.entry.created_ns / 1e9


def test_ring_buffers_are_aligned_and_ranks_without_a_dump_are_apart(real):
    # rank 0's buffer dropped its first collective, rank 3 left no dump: the first short collective is still #4
    dumps = parsed(job(real, 4, cut={2: 1}, first={0: 1}))
    m = analyse([d for d in dumps if d.rank != 3])[0]
    assert (m.seq, m.missing, m.no_dump, m.group) == (4, (2,), (3,), (0, 1, 2, 3))
    assert details(m)["no_dump_ranks"] == [3]
    assert analyse(parsed(job(real, 3, cut={}))) == []  # everyone joined everything: nothing to say


def test_two_ranks_behind_are_both_missing_from_the_first_short_collective(real):
    m = analyse(parsed(job(real, 4, cut={1: 2, 3: 1})))[0]
    assert (m.seq, m.missing, m.joined) == (3, (1,), (0, 2, 3))  # rank 1 stopped first, at #3


class Evil:
    """What a hostile "dump" holds: unpickling it would run a shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_pickle_that_would_run_code_is_refused_naming_the_file(tmp_path, protocol):
    marker = tmp_path / "owned"
    blob = pickle.dumps({"version": "2.10", "entries": [Evil(marker)]}, protocol=protocol)
    with pytest.raises(DumpError) as err:
        parse_dump(blob, "/fr/rank_5", 5)
    assert "/fr/rank_5" in str(err.value) and "system" in str(err.value) and "refused" in str(err.value)
    assert not marker.exists()
    with pytest.raises(DumpError, match="refused"):  # any global at all, even a harmless one
        parse_dump(pickle.dumps({"entries": [], "when": __import__("datetime").date(2024, 1, 1)}), "f", 0)


def test_plain_data_of_every_protocol_is_read():
    plain = {"version": "2.10", "entries": [], "pg_config": {}, "blob": b"\x00\x01", "t": (1, 2.5, None, True)}
    for protocol in range(3, pickle.HIGHEST_PROTOCOL + 1):  # bytes need no global from protocol 3 on
        assert flight_recorder.load(pickle.dumps(plain, protocol=protocol), "f") == plain


@pytest.mark.parametrize(
    ("blob", "says"),
    [
        (b"", "empty"),
        (b"hello, not a dump", "not a Flight Recorder dump"),
        (pickle.dumps([1, 2, 3]), "no dict"),
        (json.dumps({"entries": 3}).encode(), "no dict"),
        (b'{"entries": [', "not a Flight Recorder dump"),
    ],
)
def test_garbage_is_a_clear_error_naming_the_file(blob, says):
    with pytest.raises(DumpError, match=says) as err:
        parse_dump(blob, "/fr/rank_1", 1)
    assert str(err.value).startswith("/fr/rank_1: ")


def test_a_truncated_or_oversized_real_dump_is_a_clear_error(real, monkeypatch):
    data = (real / "pickle_rank_0").read_bytes()
    with pytest.raises(DumpError, match=r"truncated|not a Flight Recorder dump"):
        parse_dump(data[: len(data) // 2], "/fr/rank_0", 0)
    monkeypatch.setattr(flight_recorder, "MAX_DUMP_BYTES", len(data) - 1)
    with pytest.raises(DumpError, match="more than a dump's"):
        parse_dump(data, "/fr/rank_0", 0)


def test_ranges_are_short():
    assert ranges([8, 0, 1, 2, 3, 5]) == "0-3, 5, 8" and ranges([]) == ""


def write(directory: Path, blobs: list[bytes], prefix: str = "rank_") -> list[str]:
    paths = []
    for rank, blob in enumerate(blobs):
        (directory / f"{prefix}{rank}").write_bytes(blob)
        paths.append(str(directory / f"{prefix}{rank}"))
    return paths


def test_replay_of_the_dumps_is_collective_timeout_and_rank_hang_naming_the_missing_rank(real, tmp_path, capsys):
    paths = write(tmp_path, job(real, 3, cut={2: 1}))
    assert main(["replay", *paths, "-json"]) == 0
    diagnosis = json.loads(capsys.readouterr().out)["diagnosis"]
    (signal,) = diagnosis["signals"]
    assert signal["name"] == "collective_timeout" and signal["subject"] == {"ranks": [0, 1]}
    assert signal["evidence"]["missing_ranks"] == [2] and signal["evidence"]["lines"] == paths[:2]
    hang = diagnosis["root_causes"][0]
    assert hang["cause"] == "rank_hang" and hang["subject"] == {"rank": 2} and "torchfrtrace" in hang["remediation"]
    assert "enable PyTorch's NCCL flight recorder" not in hang["remediation"]  # it is on: the dumps were read


def test_the_collector_reads_new_dumps_once_they_settle_and_tells_each_mismatch_once(real, tmp_path):
    now = [0.0]
    write(tmp_path, job(real, 3, cut={1: 1}), prefix="old_")  # another prefix: never looked at
    (tmp_path / "rank_0").write_bytes(b"an old dump from yesterday")  # there before start-up: history, not news
    collector = FlightRecorderCollector(str(tmp_path / "rank_"), clock=lambda: now[0])
    paths = write(tmp_path, job(real, 3, cut={2: 1}))

    def look() -> tuple:
        now[0] += SCAN_S
        found = collector.collect(1000.0 + now[0]).events or ()
        if collector._reading is not None:  # the read submitted now: told on the next tick, once it is done
            collector._reading.result(timeout=30)
        return found

    assert look() == ()  # changed since the last look: wait for it to settle
    assert look() == ()  # settled: read on the collector's own thread
    told = collector.collect(1000.0 + now[0]).events  # the tick after: told, before the next look
    assert [(e.rank, e.source, e.details["missing_ranks"]) for e in told] == [(0, paths[0], [2]), (1, paths[1], [2])]
    assert told[0].ts == 1000.0 + now[0]
    assert look() == () and look() == ()  # told once
    (tmp_path / "rank_1").write_bytes(b"\x80\x02garbage")  # a rank's dump rewritten as garbage: logged, skipped
    assert look() == () and look() == () and look() == ()
    collector.close()


def test_a_file_that_is_no_dump_is_not_taken_for_one(tmp_path):
    log = tmp_path / "rank_3"
    log.write_text('{"ts": 1, "training": {}}\n')
    assert not is_dump(str(log)) and not is_dump(str(tmp_path / "x"))
