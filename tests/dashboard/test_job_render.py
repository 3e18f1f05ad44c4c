"""``top`` on a job daemon's snapshot: a node strip that stays readable at 64+ nodes (a cell a node, the
stale mark, the top cause's node highlighted, wrapped rows, a legend), the worst node's GPUs, and
stragglers named with their host. A one-node snapshot has no strip."""

from __future__ import annotations

import pytest
from rich.style import Style

from tests.dashboard.conftest import LOCAL, load_snapshot, recording_console
from tests.dashboard.jobs import TS, job_snapshot
from trainpulse_otel.dashboard.panels.nodes import CAUSE, STALE, nodes_panel
from trainpulse_otel.dashboard.view import History, View
from trainpulse_otel.publish.snapshot import Snapshot

LEFT = 88  # the left stack's width at 160 columns (layout.LEFT_SHARE)


def test_four_nodes_are_named_in_the_strip_with_the_stale_and_the_blamed_node_marked(screen):
    lines = screen(job_snapshot(4), 160, 48)
    text = "\n".join(lines)
    strip = next(line for line in lines if "node-000" in line and "node-001" in line)
    words = strip[:LEFT].split()  # the left stack; the signals panel is to its right
    assert list(zip(words[::2], words[1::2], strict=True)) == [
        ("■", "node-000"),
        ("■", "node-001"),
        ("◆", "node-002"),
        ("?", "node-003"),
    ]
    assert "Nodes 4 nodes · 32 GPUs · 1 stale" in text
    assert "◆ node-002: gpu_thermal_throttling (the top root cause)" in text
    assert "? stale: node-003 (silent 20s)" in text
    assert "■ ok  ▲ warning  ✖ critical  ? stale  ◆ root cause" in text
    assert "GPUs on node-002" in text  # the worst node's detail: its own 8 GPUs, the hot one among them
    gpu_rows = [line for line in lines if "/80G" in line]
    assert len(gpu_rows) == 8 and "89°C" in gpu_rows[3] and "thermal" in gpu_rows[3]
    assert "rank 19 @ node-002 · GPU 3" in text


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_sixty_four_nodes_are_one_cell_each_with_the_marks(screen, size):
    width, height = size
    lines = screen(job_snapshot(64), width, height)
    assert len(lines) <= height
    strip = next(line for line in lines if line.startswith("n0 "))
    cells = strip[2:LEFT].replace(" ", "")
    assert len(cells) == 64 and cells.count("◆") == 1 and cells.count("?") == 1 and cells.count("■") == 62
    assert cells.index("◆") == 2 and cells.index("?") == 3  # node-002 is blamed, node-003 is silent
    text = "\n".join(lines)
    assert "Nodes 64 nodes · 512 GPUs · 1 stale" in text and "node-002: gpu_thermal_throttling" in text
    assert "GPUs on node-002" in text
    assert "rank 19 @ node-002" in text


def test_the_blamed_node_is_highlighted_and_the_stale_one_marked_in_colour():
    view = View(Snapshot.from_dict(job_snapshot(64)), History(), LOCAL, TS)
    console = recording_console(88, 40)
    segments = list(console.render(nodes_panel(view, 88)[0], console.options.update(width=88)))
    styles = {seg.text: seg.style for seg in segments if seg.text in (CAUSE[0], STALE[0])}
    assert styles[CAUSE[0]] == Style.parse(CAUSE[1]) and styles[STALE[0]] == Style.parse(STALE[1])


def test_many_nodes_wrap_to_rows_labelled_by_their_first_node(screen):
    lines = screen(job_snapshot(128, hot="node-100", stale=("node-090", "node-091")), 160, 60)
    rows = [line for line in lines if line.startswith(("n0 ", "n72 "))]
    assert [row.split()[0] for row in rows] == ["n0", "n72"]
    assert sum(len(row[6:LEFT].replace(" ", "")) for row in rows) == 128
    text = "\n".join(lines)
    assert "? stale: node-090 (silent 20s), node-091 (silent 20s)" in text and "GPUs on node-100" in text


def test_a_single_node_snapshot_has_no_node_strip(screen):
    lines = screen(load_snapshot("straggler_8gpu"), 160, 48)
    assert not any("Nodes" in line for line in lines) and any(line.startswith(" GPUs ") for line in lines)


def test_a_blamed_node_that_went_silent_says_so(screen):
    text = "\n".join(screen(job_snapshot(4, hot="node-003", stale=("node-003",)), 160, 48))
    assert "◆ node-003: gpu_thermal_throttling (the top root cause); stale, silent 20s" in text
    assert "? stale: " not in text  # named once, on the cause's line
