"""The report's parts without a browser: the bounded series, the model's sections, the escaping, the extra."""

from __future__ import annotations

import itertools
import re

import pytest

from trainpulse_otel.cli import main
from trainpulse_otel.diagnose import Diagnosis, PipelineResult, RootCause, Signal, Transition
from trainpulse_otel.diagnose.types import Health, NodeRisk
from trainpulse_otel.report.model import build_report, signal_bars
from trainpulse_otel.report.page import SECTIONS, render_page
from trainpulse_otel.report.series import RunSeries, rank_lateness
from trainpulse_otel.samples import Frame, GpuSample, RankSample, TrainingSample

HOSTILE = '<script>alert(1)</script>$x$ & "q" <img src=http://example.invalid/a.png>'


def frame(ts: float, step_ms: float = 100.0, slow_rank_ms: float = 100.0) -> Frame:
    ranks = (
        RankSample(rank=0, gpu_index=0, hostname=HOSTILE, step_time_ms=step_ms),
        RankSample(rank=1, gpu_index=1, hostname=HOSTILE, step_time_ms=slow_rank_ms),
        RankSample(rank=2, gpu_index=2, hostname=HOSTILE, step_time_ms=step_ms),
    )
    training = TrainingSample(step_time_ms=slow_rank_ms, tokens_per_sec=1000.0, mfu=0.4, data_wait_ms=10.0, ranks=ranks)
    gpus = tuple(
        GpuSample(index=i, temperature_celsius=60.0 + i, sm_clock_mhz=1800.0, power_watts=500.0) for i in range(3)
    )
    return Frame(ts, gpus, None, training)


def diagnosed(ts: float, raised: bool, transitions: tuple[Transition, ...] = ()) -> PipelineResult:
    subject = {"rank": 1, "hostname": HOSTILE}
    signals = (Signal("rank_straggler", "warning", ts, HOSTILE, subject, {"line": HOSTILE}),) if raised else ()
    causes = (RootCause("straggler_rank", 0.8, HOSTILE, ("rank_straggler",), subject, HOSTILE),) if raised else ()
    return PipelineResult(Diagnosis(ts, Health(70.0 if raised else 100.0, "degraded"), signals, causes), transitions)


def straggler_run(ticks: int = 120, max_points: int = 1200) -> RunSeries:
    """A run whose rank 1 is 50 % slow from tick 40 to tick 80, with its signal raised and cleared."""
    series = RunSeries(max_points=max_points)
    for i in range(ticks):
        ts = 1000.0 + i
        slow = 40 <= i < 80
        subject = {"rank": 1, "hostname": HOSTILE}
        moved = ()
        if i == 40:
            moved = (Transition(ts, "raised", "rank_straggler", "warning", subject, HOSTILE),)
        elif i == 80:
            moved = (Transition(ts, "cleared", "rank_straggler", "warning", subject),)
        series.add(frame(ts, slow_rank_ms=150.0 if slow else 100.0), diagnosed(ts, slow, moved))
    return series


def test_the_series_stays_bounded_and_spans_the_whole_run():
    series = straggler_run(ticks=1000, max_points=50)
    points = series.to_dict()["points"]
    assert len(points) < 100
    assert points[0]["ts"] == 1000.0 and points[-1]["ts"] > 1000.0 + 900
    gaps = {round(b["ts"] - a["ts"]) for a, b in itertools.pairwise(points)}
    assert len(gaps) == 1  # evenly thinned


def test_the_model_pairs_raises_with_clears_and_finds_the_late_rank():
    report = build_report(straggler_run().to_dict(), "run")
    (bar,) = report.bars
    assert (bar.signal, bar.start, bar.end) == ("rank_straggler", 40.0, 80.0)
    assert report.top_cause == "straggler_rank" and report.signals == ["rank_straggler"]
    late = dict(zip(report.heat_ranks, report.heat, strict=True))
    assert max(late[1][40:80]) == 50.0 and max(late[0]) == 0.0
    assert list(report.faults[0].gpus) == [f"GPU 1 on {HOSTILE}"]  # the subject's rank's GPU
    assert report.step_parts["compute"][0] == 90.0  # the step less its data wait


def test_a_hung_rank_is_late_and_the_ranks_waiting_for_it_are_not():
    ranks = (
        RankSample(rank=0, step_time_ms=100.0, phase="sync", phase_since=980.0),
        RankSample(rank=1, step_time_ms=100.0, phase="compute", phase_since=980.0),
        RankSample(rank=2, step_time_ms=100.0, phase="all_reduce", phase_since=980.0),
    )
    assert rank_lateness(1000.0, TrainingSample(ranks=ranks)) == {0: 0.0, 1: 19_900.0, 2: 0.0}


def test_a_signal_still_active_at_the_end_has_an_open_bar():
    raised = {"ts": 5.0, "event": "raised", "signal": "s", "severity": "critical", "subject": {}}
    assert signal_bars([raised], 0.0, 10.0)[0].end is None


def test_every_string_from_the_run_is_escaped():
    page = render_page(build_report(straggler_run().to_dict(), HOSTILE))
    assert "<script" not in page and "<img" not in page and "example.invalid/a.png>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    for heading in SECTIONS:
        assert f"<h2>{heading}</h2>" in page
    assert len(re.findall(r"<svg", page)) == 6  # every chart drew (no goodput: no badput charts)


def test_an_empty_run_says_so_in_every_section():
    page = render_page(build_report(RunSeries().to_dict(), "empty"))
    assert "No signal was raised." in page and "No root cause was found." in page


def test_without_the_extra_report_exits_2_naming_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # an import of it fails
    assert main(["report", "tests/fixtures/corpus/healthy.jsonl", "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install -e '.[report]'" in err[0]
    assert not (tmp_path / "r.html").exists()


def test_nothing_valid_exits_1_and_an_unwritable_output_exits_2(capsys, tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_text("nothing a reader knows\n{not json\n")
    assert main(["report", str(junk), "-o", str(tmp_path / "r.html")]) == 1
    assert "no valid trace line or known log line" in capsys.readouterr().err
    out = tmp_path / "missing-dir" / "r.html"
    assert main(["report", "tests/fixtures/corpus/healthy.jsonl", "-o", str(out)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"trainpulse: cannot write {out}")


@pytest.fixture
def no_matplotlib(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)


def test_the_endpoint_answers_501_naming_the_extra_without_it(no_matplotlib, served):
    status, body = served.get_json("/v1/report")
    assert status == 501 and "pip install -e '.[report]'" in body["error"] and body["extra"] == "report"


def test_the_daemon_and_the_cli_load_no_matplotlib_until_a_page_is_drawn():
    import subprocess
    import sys

    code = (
        "import sys, trainpulse_otel.runtime, trainpulse_otel.api, trainpulse_otel.cli.report, "
        "trainpulse_otel.report.page; print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_template_escapes_quotes_as_the_page_always_has():
    title = "x' onmouseover='alert(1)"
    page = render_page(build_report(RunSeries().to_dict(), title))
    assert "<title>TrainPulse report: x&#x27; onmouseover=&#x27;alert(1)</title>" in page
    assert "onmouseover='" not in page


def test_the_nodes_risk_at_the_end_is_a_table_under_the_signals_escaped():
    series = straggler_run(ticks=60)
    risk = NodeRisk(HOSTILE, "gpu1", 0.35, (f"link_degradation: {HOSTILE}",))
    series.add(frame(1100.0), PipelineResult(Diagnosis(1100.0, node_risk=(risk,))))
    report = build_report(series.to_dict(), "run")
    assert report.node_risk[0]["component"] == "gpu1" and report.node_risk[0]["risk"] == 0.35
    page = render_page(report)
    assert "<h3>Node risk at the end</h3>" in page and "<td>gpu1</td>" in page and "<td>0.35</td>" in page
    assert "<script>" not in page  # the host and the evidence are the job's words: escaped
    assert "Node risk" not in render_page(build_report(straggler_run(ticks=60).to_dict(), "run"))
