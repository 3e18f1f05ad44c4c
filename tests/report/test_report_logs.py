"""The report of a training log: what the log has is on the page, and the page never contradicts itself.

Real logs from the labelled corpus's train split (``tests/fixtures/logs/corpus/train/``), each made into a page by
``trainpulse report LOG``: the loss and grad norm over steps with their NaNs marked, the throughput the log printed
and named, every raised signal on the timeline (one that lasted a single tick too), the missing GPU readings said
once, and what the lines amounted to (the log's account). Then the parts on made-up runs: the loss kept through
thinning, the throughput chosen, the account carried and escaped.
"""

from __future__ import annotations

import math
import re
from html import escape
from pathlib import Path

import pytest

from trainpulse_otel.cli import main
from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose import Diagnosis, PipelineResult, Signal, Transition
from trainpulse_otel.diagnose.types import Health
from trainpulse_otel.logs.account import LogAccount
from trainpulse_otel.report.model import STEPS_PER_SEC, THROUGHPUTS, build_report, throughput
from trainpulse_otel.report.page import LOG_SECTION, NO_GPUS, NO_LOSS, NO_THROUGHPUT, SECTIONS, render_page
from trainpulse_otel.report.series import RunSeries, job_losses
from trainpulse_otel.runtime import replay_logs
from trainpulse_otel.samples import Frame, LossPoint, TrainingSample

TRAIN = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus" / "train"
#: Megatron: TFLOP/s per GPU, lm loss and grad norm on iteration lines.
MEGATRON = "megatron_healthy_mdk-7b-stamped-fp16-warmup.log"
#: Megatron's lm loss going from 2.7 to 8.7 at iteration 29060 (loss_spike).
SPIKE = "megatron_loss_spike_tr1-13b-loss-2.7-to-8.7.log"
#: TensorFlow: ``step: N total_loss: nan`` from step 100 on (nonfinite_loss).
NAN_BY_STEP = "tensorflow_nonfinite_loss_total-loss-nan-global-step-sec.log"
#: Hugging Face dicts with no step: ``'loss': inf`` then ``'loss': nan``.
INF_THEN_NAN = "huggingface_nonfinite_loss_vicuna-lora-loss-inf-then-nan.log"
#: A crash and its out-of-memory error, each a signal raised at the log's only tick.
ONE_TICK = "detectron2_out_of_memory_d2-backward-oom.log"

HOSTILE = '<script>alert(1)</script> & "q"'


def report_of(name: str, tmp_path: Path) -> str:
    page = tmp_path / f"{name}.html"
    assert main(["report", str(TRAIN / name), "-o", str(page)]) == 0
    return page.read_text(encoding="utf-8")


def sections(page: str) -> dict[str, str]:
    """Each ``<h2>`` heading's section body."""
    return dict(re.findall(r"<section><h2>(.*?)</h2>(.*?)</section>", page, re.DOTALL))


def assert_consistent(page: str) -> None:
    """What no page may say: no raise beside a table of raised signals; the GPU sentence at most once."""
    body = sections(page)
    timeline = body["Signals on a timeline"]
    assert not ("No signal was raised." in timeline and "<th>raised (s)</th>" in timeline)
    if "<th>raised (s)</th>" in timeline:
        assert "<svg" in timeline  # every raised signal is drawn
    assert page.count(NO_GPUS) <= 1 and "No GPU reading around it." not in page


def test_a_megatron_log_shows_its_loss_over_iterations_and_names_its_throughput(tmp_path):
    page = report_of(MEGATRON, tmp_path)
    body = sections(page)
    loss = body["Loss and gradient norm over steps"]
    assert "<svg" in loss and loss.startswith("<p>Over step:")  # Megatron's iteration is the step
    assert ">grad norm<" in loss  # its own panel, labelled
    speed = body["Throughput and MFU"]
    shown = re.search(r"Throughput shown as <b>(.*?)</b>", speed)
    assert shown and escape(shown.group(1)) in {escape(label) for _, label in THROUGHPUTS}
    assert f"throughput: {shown.group(1)}" in speed  # and the chart says so
    assert NO_THROUGHPUT not in page and "neither tokens/s nor MFU" not in page
    assert_consistent(page)


def test_a_nan_loss_is_marked_where_it_happened_with_the_raise_that_named_it(tmp_path):
    page = report_of(NAN_BY_STEP, tmp_path)
    loss = sections(page)["Loss and gradient norm over steps"]
    assert "<svg" in loss and "NaN or inf, marked at the top of its panel" in loss
    assert re.search(r"loss NaN/inf \(\d+\), drawn at the top", loss)
    assert "NaN at 100" in loss  # the first NaN's step, as the log printed it
    assert re.search(r"nonfinite_loss raised \((warning|critical)\)", loss)
    assert "No signal was raised." not in page
    assert_consistent(page)


def test_inf_and_nan_without_steps_are_drawn_in_the_order_reported(tmp_path):
    page = report_of(INF_THEN_NAN, tmp_path)
    loss = sections(page)["Loss and gradient norm over steps"]
    assert loss.startswith("<p>Over loss report (in the order reported)")
    assert "inf at " in loss and "NaN at " in loss


def test_a_loss_spike_is_marked_on_the_loss_chart(tmp_path):
    page = report_of(SPIKE, tmp_path)
    loss = sections(page)["Loss and gradient norm over steps"]
    assert "<svg" in loss and "loss_spike raised" in loss
    timeline = sections(page)["Signals on a timeline"]
    assert "loss_spike" in timeline and "No signal was raised." not in timeline
    assert_consistent(page)


def test_signals_of_a_single_tick_are_on_the_timeline_and_no_gpu_is_said_once(tmp_path):
    page = report_of(ONE_TICK, tmp_path)
    body = sections(page)
    timeline = body["Signals on a timeline"]
    assert "<svg" in timeline and "No signal was raised." not in page
    raised = re.findall(r"<td class='(?:warning|critical)'>\w+</td><td>(\w+)</td>", timeline)
    assert len(raised) >= 2 and set(raised) <= set(re.findall(r"(\w+) · ", timeline))  # a row each on the chart
    assert body["GPUs around each fault"] == f"<p class='none'>{NO_GPUS}</p>"
    assert page.count(NO_GPUS) == 1 and "No GPU reading around it." not in page
    assert body["Health over time"].startswith("<svg")  # one tick is still drawn
    assert_consistent(page)


@pytest.mark.parametrize("name", [MEGATRON, SPIKE, NAN_BY_STEP, ONE_TICK])
def test_the_page_of_a_log_says_what_its_lines_amounted_to(name, tmp_path):
    page = report_of(name, tmp_path)
    told = replay_logs([str(TRAIN / name)], Settings()).account
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings == [SECTIONS[0], LOG_SECTION, *SECTIONS[1:]]  # near the top
    said = sections(page)[LOG_SECTION]
    assert f"<p>Read {escape(told.summary())}.</p>" in said
    for note in told.notes:
        assert f"<li>{escape(note)}</li>" in said


# The parts, on made-up runs.


def tick(series: RunSeries, ts: float, losses: tuple[LossPoint, ...], moved: tuple[Transition, ...] = ()) -> None:
    signals = tuple(Signal(t.signal, t.severity, ts, "", t.subject, {"first_step": 7}) for t in moved)
    frame = Frame(ts, training=TrainingSample(step_time_ms=250.0), losses=losses)
    series.add(frame, PipelineResult(Diagnosis(ts, Health(100.0, "healthy"), signals), moved))


def test_thinning_the_loss_keeps_every_nan_and_the_spike():
    series = RunSeries(max_points=10)
    for i in range(400):
        loss = math.nan if i == 77 else (50.0 if i == 333 else 2.0 + (i % 5) * 0.01)
        tick(series, 1000.0 + i, (LossPoint(1000.0 + i, i, loss, 1.0),))
    rows = series.to_dict()["losses"]
    assert len(rows) < 40 and series.to_dict()["loss_reports"] == 400
    assert [r[1] for r in rows if math.isnan(r[3])] == [77]  # kept at its own step
    assert max(r[3] for r in rows if not math.isnan(r[3])) == 50.0
    assert [r[1] for r in rows] == sorted(r[1] for r in rows)


def test_a_job_loss_is_kept_and_ranks_only_give_each_steps_worst():
    job = LossPoint(1.0, 5, 2.0, 0.5)
    ranked = (LossPoint(1.0, 5, 2.0, None, rank=0), LossPoint(1.0, 5, math.inf, None, rank=1))
    assert job_losses(Frame(1.0, losses=(job, *ranked))) == [job]
    (worst,) = job_losses(Frame(1.0, losses=ranked))
    assert worst.loss == math.inf and worst.rank is None
    assert job_losses(Frame(1.0, losses=(LossPoint(1.0, 5, None, None, 3),))) == []


def test_the_loss_signal_is_marked_at_the_step_its_evidence_names():
    series = RunSeries()
    for i in range(10):
        ts = 1000.0 + i
        moved = (Transition(ts, "raised", "loss_spike", "warning", {}, "spike"),) if i == 8 else ()
        tick(series, ts, (LossPoint(ts, i, 9.0 if i == 7 else 2.0, None),), moved)
    report = build_report(series.to_dict(), "run")
    assert report.losses is not None and report.losses.marks == [(7.0, "loss_spike", "warning")]
    assert report.losses.grad_norm == [None] * 10
    loss = sections(render_page(report))["Loss and gradient norm over steps"]
    assert "<svg" in loss and "loss_spike raised (warning)" in loss and ">grad norm<" not in loss


def test_throughput_is_the_first_the_run_reported_else_steps_per_second():
    assert throughput([{"samples_per_sec": 3.0, "tflops": 100.0}, {}]).label == "samples/s"
    assert throughput([{"tflops": 100.0, "step_time_ms": 500.0}]).label == "TFLOP/s per GPU"
    steps = throughput([{"step_time_ms": 500.0}, {}])
    assert (steps.label, steps.values) == (STEPS_PER_SEC, [2.0, None])
    assert throughput([{"mfu": 0.4}]) is None


def test_a_run_with_no_throughput_and_no_loss_says_so_naming_what_was_looked_for():
    series = RunSeries()
    series.add(Frame(1.0), PipelineResult(Diagnosis(1.0, Health(100.0, "healthy"))))
    page = render_page(build_report(series.to_dict(), "run"))
    assert escape(NO_THROUGHPUT) in page and "tokens/s, samples/s, TFLOP/s per GPU" in page
    assert escape(NO_LOSS) in page


def test_a_signal_raised_and_cleared_at_once_is_still_drawn():
    series = RunSeries()
    for i in range(5):
        ts = 1000.0 + i
        moved = (
            (
                Transition(ts, "raised", "rank_crashed", "critical", {}),
                Transition(ts, "cleared", "rank_crashed", "critical"),
            )
            if i == 2
            else ()
        )
        tick(series, ts, (), moved)
    report = build_report(series.to_dict(), "run")
    (bar,) = report.bars
    assert bar.start == bar.end == 2.0
    timeline = sections(render_page(report))["Signals on a timeline"]
    assert "<svg" in timeline and "No signal was raised." not in timeline


def test_the_account_is_carried_escaped_and_absent_for_a_daemons_run():
    series = RunSeries()
    tick(series, 1.0, (LossPoint(1.0, 1, 2.0, None),))
    assert LOG_SECTION not in render_page(build_report(series.to_dict(), "daemon"))  # no account: no section
    series.log_account = LogAccount(3, 1, 0, 2, {HOSTILE: 1}, notes=(f"a note {HOSTILE}",))
    run = series.to_dict()
    assert run["log_account"]["summary"] == series.log_account.summary()
    page = render_page(build_report(run, "log"))
    said = sections(page)[LOG_SECTION]
    assert "<script" not in page and escape(series.log_account.summary()) in said
    assert f"<li>a note {escape(HOSTILE)}</li>" in said
