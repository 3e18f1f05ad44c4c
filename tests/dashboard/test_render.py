"""Frames rendered from fixture snapshots at fixed sizes: what a user would see on screen."""

from __future__ import annotations

import re
from statistics import median
from typing import Any

import pytest
from rich.cells import cell_len

from trainpulse_otel.collect.sim import SimulatedNode
from trainpulse_otel.dashboard.view import History, Link
from trainpulse_otel.publish.snapshot import Snapshot
from trainpulse_otel.samples import to_dict

GPU_ROW = re.compile(r"(?:^|\s{2})(\d{1,2}) +(?:H100[^█]*)?[█▉▊▋▌▍▎▏░]")
REMOTE = "http://127.0.0.1:9876"


def fits(lines: list[str], width: int, height: int) -> bool:
    return len(lines) == height and all(cell_len(line) <= width for line in lines)


def gpu_indices(lines: list[str]) -> set[int]:
    return {int(i) for line in lines for i in GPU_ROW.findall(line)}


def line_with(lines: list[str], needle: str) -> str:
    found = [line for line in lines if needle in line]
    assert found, f"{needle!r} is not on screen:\n" + "\n".join(lines)
    return found[0]


# ------------------------------------------------------------------ 8 GPUs, a straggler


def test_straggler_at_80x24_keeps_gpus_signals_cause_and_callout(screen, snapshot):
    lines = screen(snapshot("straggler_8gpu"), 80, 24)
    text = "\n".join(lines)
    assert fits(lines, 80, 24)
    assert lines[0].lstrip().startswith("64 DEGRADED")  # the big score collapsed to a badge
    assert gpu_indices(lines) == set(range(8))
    assert "WARN rank_straggler" in text and "WARN sync_imbalance" in text
    assert "straggler_rank 82%" in text and "check for CPU contention" in text
    assert "rank 5 · GPU 5 · node-000" in text  # the straggler, called out from the signal's subject


def test_straggler_at_160x48_shows_every_panel_in_full(screen, snapshot, history):
    lines = screen(snapshot("straggler_8gpu"), 160, 48, history=history("straggler_8gpu"))
    text = "\n".join(lines)
    assert fits(lines, 160, 48)
    assert lines[0].startswith("█▀▀ █ █")  # "64" three rows tall
    assert "model llama-3-8b" in text and "world 8 (dp 8 · tp 1 · pp 1)" in text
    heading = line_with(lines, "SM MHz")
    assert "util" in heading and "memory" in heading and "power W" in heading and "throttle" in heading
    for index in range(8):
        row = next(line for line in lines if re.match(rf"{index} +[█▉▊▋▌▍▎▏░]", line))
        assert "/700W" in row and "/1980" in row and "°C" in row
    for label in ("tokens/s", "MFU"):
        assert re.search("[▁▂▃▄▅▆▇█]{20,}", line_with(lines, label))
    legend = " ".join(lines)
    for part in ("■ compute", "■ data", "■ tokenizer", "■ sync", "■ all-reduce", "■ checkpoint"):
        assert part in legend
    assert "▼5" in line_with(lines, "rank  ")
    assert "#1 straggler_rank" in text and "#2 communication_bound" in text
    assert text.count("→ ") == 2
    assert "1m35s" in line_with(lines, "WARN rank_straggler")  # age on the snapshot's own clock
    assert "swap" in line_with(lines, "mem ")
    goodput = line_with(lines, "goodput ")
    assert re.search(r"goodput +78% 10 min 75% · lost: straggler_rank 38s, checkpoint_io_bound 4s *$", goodput), goodput


def test_a_restarted_job_s_life_is_a_row_under_goodput(screen, snapshot, history):
    snap = snapshot("straggler_8gpu")
    snap["diagnosis"]["goodput"]["job"] = {
        "attempts": [
            {"start": 1.0, "end": 54.0, "first_step": 1, "last_step": 50, "end_reason": "failure"},
            {"start": 75.0, "end": None, "first_step": 41, "last_step": 90, "end_reason": None},
        ],
        "interruptions": 1,
        "mtbf_s": 106.0,
        "ettr": 0.7323,
        "lost_s": {"lost_progress": 12.0, "restart": 16.0, "checkpoint_load": 5.0},
        "checkpoint": {"last_step": None, "interval_s": 1200.0, "save_s": 2.0, "load_s": 5.0},
        "recommended_checkpoint_interval_s": 19.3,
    }
    lines = screen(snap, 160, 48, history=history("straggler_8gpu"))
    assert fits(lines, 160, 48)
    row = line_with(lines, "ETTR")
    assert re.search(r"job +ETTR 73% attempt 2 · restarts lost 33s · saves every 20m00s, Daly 19s", row), row


def test_the_nodes_risk_is_a_row_under_the_signals_riskiest_first(screen, snapshot, history):
    snap = snapshot("straggler_8gpu")
    snap["diagnosis"]["node_risk"] = [
        {"component": "node", "risk": 0.675, "evidence": ["gpu3 0.68"]},
        {"component": "gpu3", "risk": 0.675, "evidence": ["link_degradation: GPU 3's PCIe link x8 of x16"]},
        {"component": "mlx5_0/1", "risk": 0.35, "evidence": ["link_degradation: symbol_error 50/s"],
         "hostname": "node-7"},
    ]  # fmt: skip
    lines = screen(snap, 160, 48, history=history("straggler_8gpu"))
    assert fits(lines, 160, 48)
    row = line_with(lines, "risk ")
    assert re.search(r"risk node 0\.68 · gpu3 0\.68 · mlx5_0/1@node-7 0\.35", row), row


# ------------------------------------------------------------------ 16 GPUs, thermal


def test_sixteen_gpus_at_80x24_fit_two_a_line(screen, snapshot):
    lines = screen(snapshot("thermal_16gpu"), 80, 24)
    text = "\n".join(lines)
    assert fits(lines, 80, 24)
    assert gpu_indices(lines) == set(range(16))
    hot = line_with(lines, "87°C")
    assert "thermal" in hot and re.search(r"\b5 +[█▉▊▋▌▍▎▏░]", hot)
    assert "2 critical, 3 warning" in text
    assert "CRIT thermal_instability" in text and "gpu_thermal_throttling 88%" in text


def test_sixteen_gpus_at_160x48_one_row_each_with_throttle_flags(screen, snapshot, history):
    lines = screen(snapshot("thermal_16gpu"), 160, 48, history=history("thermal_16gpu"))
    text = "\n".join(lines)
    assert fits(lines, 160, 48)
    assert gpu_indices(lines) == set(range(16))
    throttled = [line for line in lines if "thermal " in line[:100] and "°C" in line]
    assert len(throttled) == 1 and throttled[0].startswith("5 ") and "1485/1980" in throttled[0]
    for name in (
        "thermal_instability",
        "throughput_collapse",
        "rank_straggler",
        "sync_imbalance",
        "thermal_throttle_risk",
    ):
        assert name in text
    assert "#3 gpu_power_throttling" in text


def test_panels_collapse_in_order_as_the_terminal_shrinks(screen, snapshot):
    thermal = snapshot("thermal_16gpu")
    seen_host_gone_at = None
    for height in range(48, 11, -1):
        lines = screen(thermal, 80, height)
        text = "\n".join(lines)
        assert fits(lines, 80, height), height
        assert "thermal_instability" in text, f"the signals left the screen at 80x{height}"
        if "Host" not in text and seen_host_gone_at is None:
            seen_host_gone_at = height
            assert " Signals 2 critical, 3 warning " in text  # host goes while signals are still a panel
    assert seen_host_gone_at is not None and seen_host_gone_at >= 20


# ------------------------------------------------------------------ no GPU, no training, no daemon


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_host_only_without_training_stays_readable(screen, snapshot, size):
    lines = screen(snapshot("host_only"), *size)
    text = "\n".join(lines)
    assert fits(lines, *size)
    assert "HEALTHY" in text
    assert "GPUs none reported (host-only mode)" in text
    assert "no training data yet" in text
    assert "Signals none active" in text
    assert "load 1.92" in text and "of 16" in text
    assert "Ranks" not in text and "Root causes" not in text


def test_before_the_first_snapshot_the_header_says_waiting(screen):
    link = Link(source=REMOTE, state="connecting", changed_at=0.0)
    lines = screen(None, 80, 24, link=link, wall=5.0)
    text = "\n".join(lines)
    assert fits(lines, 80, 24)
    assert "WAITING" in text and f"connecting to {REMOTE}" in text


def test_a_lost_daemon_is_shown_with_the_last_data(screen, snapshot):
    straggler = snapshot("straggler_8gpu")
    now = straggler["timestamp"]
    link = Link(source=REMOTE, state="disconnected", changed_at=now - 12, error="connection refused", last_ok=now - 14)
    lines = screen(straggler, 80, 24, link=link, wall=now)
    text = "\n".join(lines)
    assert fits(lines, 80, 24)
    assert "DISCONNECTED" in text
    assert f"no answer from {REMOTE} for 12s (connection refused)" in text
    assert gpu_indices(lines) == set(range(8))


# ------------------------------------------------------------------ thousands of ranks, history


def _sim_snapshot(scenario: str, seconds: float, **node: Any) -> dict[str, Any]:
    sim = SimulatedNode(scenario, seed=0, **node)
    collected = None
    for t in range(0, int(seconds) + 1, 4):
        collected = sim.sample(float(t))
    assert collected is not None and collected.training is not None
    return {
        "timestamp": sim.start_ts + seconds,
        "mode": "sim",
        "gpus": [to_dict(g) for g in collected.gpus],
        "host": to_dict(collected.host),
        "training": to_dict(collected.training),
        "diagnosis": {
            "health": {"score": 70.0, "status": "degraded"},
            "root_causes": [],
            "signals": [
                {
                    "name": "rank_straggler",
                    "severity": "warning",
                    "since": sim.start_ts + seconds - 30,
                    "message": "rank 5 is 33% slower than the median rank",
                    "subject": {"rank": 5, "gpu_index": 5},
                    "evidence": {},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def two_thousand_ranks() -> dict[str, Any]:
    return _sim_snapshot("rank_straggler", 120, ranks=2048)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_thousands_of_ranks_fit_a_strip_with_the_straggler_marked(screen, two_thousand_ranks, size):
    lines = screen(two_thousand_ranks, *size)
    text = "\n".join(lines)
    assert fits(lines, *size)
    strip = [line for line in lines if re.match(r"r\d+ +[█▼]", line)]
    assert strip, text
    assert sum(line.count("▼") for line in strip) == 1
    assert re.search(r"one cell = \d+ ranks", text)
    assert "2048 ranks" in text
    assert "rank 5 · GPU 5 · node-000" in text


def test_sparklines_show_a_throughput_collapse_from_the_history(screen):
    sim = SimulatedNode("throughput_collapse", seed=0)  # a power cap lands at 90 s: tokens/s falls ~40 %
    history = History()
    for t in range(0, 181, 2):  # 91 snapshots: all of them fit the sparkline at 120 columns
        collected = sim.sample(float(t))
        latest = Snapshot(sim.start_ts + t, "sim", gpus=collected.gpus, training=collected.training)
        history.add(latest)
    lines = screen(latest, 120, 48, history=history)
    spark = re.search("[▁▂▃▄▅▆▇█]{80,}", line_with(lines, "tokens/s")).group()
    levels = "▁▂▃▄▅▆▇█"
    before = [levels.index(c) for c in spark[: len(spark) // 3]]
    after = [levels.index(c) for c in spark[-len(spark) // 3 :]]
    assert median(before) >= median(after) + 4, spark  # a cliff, give or take the healthy run's glitches


@pytest.mark.parametrize("name", ["straggler_8gpu", "thermal_16gpu", "host_only"])
@pytest.mark.parametrize("size", [(30, 8), (60, 15), (139, 40), (140, 40), (300, 80)])
def test_every_frame_fits_its_terminal_exactly(screen, snapshot, name, size):
    lines = screen(snapshot(name), *size)
    assert fits(lines, *size)
    assert lines[0].strip()  # the header is never the part that gets cropped
