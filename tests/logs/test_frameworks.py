"""Every framework's iteration lines, read from real logs (tests/fixtures/logs/SOURCES.md): the reports they
hold, the framework each stream is found to be, and the numerical faults they tell, through the pipeline."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.parts import stepper
from trainpulse_otel.adapters import torchtitan
from trainpulse_otel.collect.logfile import read_logs
from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.logs.frameworks import FRAMEWORKS
from trainpulse_otel.runtime.replay import replay
from trainpulse_otel.samples import TrainingSample

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
START = 1_000.0


def read(name: str, framework: str | None = None, *more: str) -> tuple[LogReader, list[TrainingSample]]:
    """Every report of the fixture ``name`` (and ``more``, read on as the same file), in order."""
    reader = LogReader(framework, start=START)
    text = "".join((LOGS / n).read_text() for n in (name, *more))
    out = [item for n, line in enumerate(text.splitlines(), 1) for item in reader.feed(LogLine(line, name, n))]
    reports = [item for item in [*out, *reader.flush()] if isinstance(item, TrainingSample)]
    return reader, reports


def detected(reader: LogReader) -> set[str]:
    return {stream.parser.name for stream in reader._streams.values() if stream.parser is not None}


def by_step(reports: list[TrainingSample]) -> dict[int | None, TrainingSample]:
    return {r.global_step: r for r in reports}


#: Every fixture: the framework its stream is found to be, and how many reports it holds.
FIXTURES = {
    "megatron/2020_no_colons.log": ("megatron", 3),
    "megatron/2020_nan_no_colons.log": ("megatron", 9),
    "megatron/2022_fp16_skipped_bert.log": ("megatron", 2),
    "megatron/2023_bigscience_grad_norm_nan.log": ("megatron", 3),
    "megatron/2023_gpt_neox_deepspeed.log": ("megatron", 2),
    "megatron/2023_gpt_neox_pipeline.log": ("deepspeed", 1),
    "megatron/2023_megatron_llm_bad_grad_norm.log": ("megatron", 2),
    "megatron/2023_megatron_llm_nan_dropped.log": ("megatron", 2),
    "megatron/2024_alcf_fractional_stamp_equals.log": ("megatron", 3),
    "megatron/2024_megatron_deepspeed_ds_lines_first.log": ("deepspeed", 2),
    "megatron/2024_megatron_deepspeed_nan_no_loss.log": ("megatron", 1),
    "megatron/2024_stamped_moe.log": ("megatron", 3),
    "megatron/2025_fp16_startup_timers_checkpoint.log": ("megatron", 12),
    "megatron/2026_bridge_mtp.log": ("megatron", 3),
    "deepspeed/2020_untagged_microsteps.log": ("deepspeed", 0),
    "deepspeed/2021_deepscale_stage2_at_floor.log": ("deepspeed", 4),
    "deepspeed/2021_deepscale_stage3_tqdm.log": ("deepspeed", 5),
    "deepspeed/2021_hf_wall_clock_breakdown_tqdm.log": ("deepspeed", 0),
    "deepspeed/2022_fused_overflow_detected.log": ("deepspeed", 2),
    "deepspeed/2022_notebook_samplespersec.log": ("deepspeed", 3),
    "deepspeed/2023_accelerate_breakdown_tqdm.log": ("deepspeed", 0),
    "deepspeed/2023_hf_dicts_with_ds_steps.log": ("huggingface", 8),
    "deepspeed/2023_hf_trainer_overflow_storm.log": ("deepspeed", 8),  # two bars (377, 380) before its loss
    "deepspeed/2023_hysteresis_storm.log": ("deepspeed", 4),
    "deepspeed/2023_min_scale_exception.log": ("deepspeed", 1),
    "deepspeed/2023_unfused_grad_overflow_all_ranks.log": ("deepspeed", 3),
    "deepspeed/2023_zero1_overflow_startup.log": ("deepspeed", 21),
    "torchtitan/2025_no_grad_norm_gc_profiler.log": ("torchtitan", 6),
    "torchtitan/2026_rank_prefixed.log": ("torchtitan", 5),
    "torchtitan/2026_unprefixed_every_rank.log": ("torchtitan", 2),
    "huggingface/2023_llava_tqdm_no_grad_norm.log": ("huggingface", 4),
    "huggingface/2024_minicpm_grad_norm_nan.log": ("huggingface", 5),
    "huggingface/2024_qwen_vl_tqdm_dicts.log": ("huggingface", 3),  # its first bar, then two dicts
    "huggingface/2026_transformers5_quoted_values.log": ("huggingface", 7),
    "lightning/2020_lightning_each_step_twice.log": ("lightning", 5),
    "lightning/2021_lightning_bar_running_loss.log": ("lightning", 1),
    "lightning/2023_nemo_megatron_bar_s_per_it.log": ("lightning", 1),
    "lightning/2023_nemo_neuron_bars.log": ("lightning", 3),
    "lightning/2024_nemo_padded_step.log": ("lightning", 1),
    "lightning/2024_nemo_step_timing_sci_step.log": ("lightning", 1),
    "lightning/2025_nemo2_progress_printer.log": ("lightning", 4),
    "lightning/2025_nemo_it_no_total.log": ("lightning", 1),
    "lightning/2025_neuron_dpo_bars.log": ("lightning", 1),
}


def test_every_fixture_is_listed_and_its_source_cited():
    on_disk = {str(p.relative_to(LOGS)) for p in LOGS.rglob("*.log") if p.relative_to(LOGS).parts[0] != "corpus"}
    assert on_disk == set(FIXTURES)
    sources = (LOGS / "SOURCES.md").read_text()
    assert all(f"`{name}`" in sources for name in FIXTURES)


@pytest.mark.parametrize(("name", "expected"), sorted(FIXTURES.items()))
def test_each_fixture_is_detected_and_gives_its_reports(name, expected):
    framework, count = expected
    reader, reports = read(name)
    assert detected(reader) == {framework}
    assert len(reports) == count
    assert reader.stats.invalid == 0 and reader.stats.lines == len((LOGS / name).read_text().splitlines())


@pytest.mark.parametrize("name", sorted(n for n, (fw, count) in FIXTURES.items() if count))
def test_the_framework_named_reads_the_same_reports(name):
    framework = FIXTURES[name][0]
    _, found = read(name)
    _, forced = read(name, framework)
    assert [r.global_step for r in forced] == [r.global_step for r in found]


def test_a_framework_named_reads_no_other_framework_s_lines():
    reader, reports = read("megatron/2024_stamped_moe.log", "torchtitan")
    assert reports == [] and reader.stats.unknown == reader.stats.lines == 3
    reader, reports = read("torchtitan/2026_rank_prefixed.log", "megatron")
    assert reports == [] and reader.stats.unknown == 5


def test_megatron_2020_lines_without_colons_and_their_one_line_timers():
    reader, reports = read("megatron/2020_no_colons.log")
    first = reports[0]
    assert (first.global_step, first.loss, first.learning_rate, first.loss_scale) == (100, 4.799004, 1.258e-4, 32768.0)
    assert (first.step_time_ms, first.data_wait_ms, first.all_reduce_wait_ms) == (1048.5, 14.88, 93.32)
    assert reader.stats.unknown == 7  # warnings, the memory report, the validation lines: counted, not raised


def test_megatron_nan_printed_dropped_or_skipped():
    _, printed = read("megatron/2020_nan_no_colons.log")
    assert math.isnan(by_step(printed)[700].loss) and by_step(printed)[800].loss == 5.193296
    _, dropped = read("megatron/2023_megatron_llm_bad_grad_norm.log")
    assert math.isnan(dropped[0].loss) and dropped[0].grad_norm == 0.794  # no loss printed, nothing skipped
    assert dropped[1].loss is None and dropped[1].skipped_steps == 1  # the one iteration skipped: no NaN
    _, single = read("megatron/2024_megatron_deepspeed_nan_no_loss.log")
    assert math.isnan(single[0].loss) and single[0].skipped_steps == 0
    _, grad = read("megatron/2023_bigscience_grad_norm_nan.log")
    assert all(math.isnan(r.grad_norm) and math.isnan(r.loss) for r in grad)


def test_megatron_fp16_warm_up_skips_are_skips_not_nan_and_the_save_is_timed():
    _, reports = read("megatron/2025_fp16_startup_timers_checkpoint.log")
    steps = by_step(reports)
    assert steps[10].loss is None and steps[10].skipped_steps == 10 and steps[10].loss_scale == 8388608.0
    assert steps[30].loss == 10.38769 and steps[30].skipped_steps == 5 and steps[30].grad_norm is None
    assert steps[100].checkpoint_ms == 3413.14 and steps[90].checkpoint_ms is None
    assert steps[100].timestamp == 1744587751.0  # the iteration line's own stamp
    _, old = read("megatron/2022_fp16_skipped_bert.log")
    assert old[0].loss is None and old[0].skipped_steps == 10 and old[0].data_wait_ms == 25.27
    assert old[1].loss == 10.12573  # lm loss first; the sop loss beside it is no training loss of its own


def test_megatron_forks_gpt_neox_alcf_and_megatron_deepspeed():
    _, neox = read("megatron/2023_gpt_neox_deepspeed.log")
    first = neox[0]
    assert (first.loss, first.tflops, first.samples_per_sec, first.data_wait_ms) == (2.276005, 9.8, 2.93, 2369.79)
    _, alcf = read("megatron/2024_alcf_fractional_stamp_equals.log")
    assert alcf[0].timestamp == pytest.approx(1726527559.287338) and alcf[0].loss == 11.16725
    assert (alcf[1].step_time_ms, alcf[1].tflops, alcf[1].grad_norm) == (8457.2, 70.98, 6.271)
    reader, mds = read("megatron/2024_megatron_deepspeed_ds_lines_first.log")
    assert [(r.framework, r.global_step, r.loss) for r in mds] == [("megatron", 1, 11.17136), ("megatron", 2, 25.37718)]
    assert reader.stats.repeated == 0  # DeepSpeed's own record of step 1 gave way to Megatron's line
    _, pipe = read("megatron/2023_gpt_neox_pipeline.log")
    assert (pipe[0].framework, pipe[0].global_step, pipe[0].tflops) == ("megatron", 1, 18.8)


def test_megatron_cut_line_waits_and_the_2026_losses():
    _, reports = read("megatron/2023_megatron_llm_nan_dropped.log")
    assert [r.global_step for r in reports] == [3383, 3384]  # 3385 was cut off mid-line: not a report
    _, bridge = read("megatron/2026_bridge_mtp.log")
    assert bridge[0].loss == 0.8716962 and bridge[0].timestamp == 1780007180.0


def test_deepspeed_overflow_storm_reports_each_skip_with_its_loss_scale():
    _, reports = read("deepspeed/2023_zero1_overflow_startup.log")
    skips = [r for r in reports if r.global_step is None]
    assert len(skips) == 17 and all(r.skipped_steps == 1 for r in skips)
    assert [r.loss_scale for r in skips[:2]] == [2147483648.0, 1073741824.0] and skips[-1].loss_scale == 32768.0
    assert skips[0].timestamp == pytest.approx(1690204892.378)
    steps = by_step(reports)
    assert steps[10].samples_per_sec == pytest.approx(216.75849639214218) and steps[10].learning_rate == 1e-4
    assert steps[20].skipped_steps is None  # its 7 skips were told one by one already
    assert steps[30].skipped_steps == 0  # none since: the run of skips is over


def test_deepspeed_overflow_lines_of_every_release_count_each_skip_once():
    _, unfused = read("deepspeed/2023_unfused_grad_overflow_all_ranks.log")  # four ranks print each line
    assert [(r.skipped_steps, r.loss_scale) for r in unfused if r.global_step is None] == [(1, 4096.0)] * 2
    _, fused = read("deepspeed/2022_fused_overflow_detected.log")
    assert [r.loss_scale for r in fused] == [134217728.0, 67108864.0]
    _, floor = read("deepspeed/2021_deepscale_stage2_at_floor.log")
    assert [r.loss_scale for r in floor] == [1.0] * 4 and len({r.timestamp for r in floor}) == 4
    _, hysteresis = read("deepspeed/2023_hysteresis_storm.log")
    assert [r.loss_scale for r in hysteresis] == [65536.0, 32768.0, 16384.0, 8192.0]
    _, fatal = read("deepspeed/2023_hf_trainer_overflow_storm.log", None, "deepspeed/2023_min_scale_exception.log")
    assert fatal[-1].skipped_steps == 1 and fatal[-1].loss_scale == 2.0


def test_deepspeed_throughput_timers_and_progress_lines():
    _, old = read("deepspeed/2022_notebook_samplespersec.log")
    assert [(r.global_step, r.skipped_steps) for r in old] == [(40, None), (50, 0), (60, 0)]
    assert old[0].samples_per_sec == pytest.approx(83.48609168106144)
    _, stage3 = read("deepspeed/2021_deepscale_stage3_tqdm.log")
    assert [r.loss_scale for r in stage3][-1] == 524288.0


def test_deepspeed_under_the_trainer_gives_both_its_steps_and_the_trainer_losses():
    _, reports = read("deepspeed/2023_hf_dicts_with_ds_steps.log")
    assert [r.loss for r in reports if r.framework == "huggingface"] == [2.075, 0.8091, 0.5003, 0.466, 0.4338]
    assert [r.global_step for r in reports if r.framework == "deepspeed"] == [10, 20, 30]
    _, storm = read("deepspeed/2023_hf_trainer_overflow_storm.log")
    assert [r.loss_scale for r in storm if r.skipped_steps] == [32.0, 16.0, 8.0, 4.0, 2.0]
    assert [r.loss for r in storm if r.framework == "huggingface"] == [2.0491]


def test_torchtitan_every_rank_once_thousands_separators_and_its_own_time():
    reader, reports = read("torchtitan/2026_unprefixed_every_rank.log")
    assert [r.global_step for r in reports] == [4, 5] and reader.stats.repeated == 6
    assert reports[0].mfu == pytest.approx(0.1399) and reports[0].timestamp == pytest.approx(1771962377.508)
    first = (LOGS / "torchtitan/2026_unprefixed_every_rank.log").read_text().splitlines()[0]
    assert torchtitan.line_values(first)["tps"] == 10050
    _, plain = read("torchtitan/2025_no_grad_norm_gc_profiler.log")
    assert plain[0].grad_norm is None and plain[0].loss == 6.1384 and plain[0].global_step == 200


def test_trainer_dicts_bare_nan_quoted_values_and_the_end_of_training():
    _, bare = read("huggingface/2024_minicpm_grad_norm_nan.log")
    assert bare[0].loss == 1.0778 and math.isnan(bare[0].grad_norm)
    _, quoted = read("huggingface/2026_transformers5_quoted_values.log")
    assert quoted[1].loss == 1.384 and quoted[1].learning_rate == 8.83e-05 and math.isnan(quoted[0].grad_norm)
    assert quoted[-1].loss == 0.6266 and quoted[-1].step_time_ms == pytest.approx(1000 / 0.07)
    reader, bars = read("huggingface/2024_qwen_vl_tqdm_dicts.log")
    # the first bar, read before any dict (step 1, 22.46 s/it); the bars after the first dict with a loss are its
    assert len(bars) == 3 and bars[0].global_step == 1 and reader.stats.unknown == 3  # the blank lines


def test_lightning_each_step_once_as_its_last_draw_shows_it():
    _, reports = read("lightning/2020_lightning_each_step_twice.log")
    assert [r.loss for r in reports] == [10.473, 10.224, 10.047, 9.926, 9.847]
    assert [r.step_time_ms for r in reports][:2] == [8770.0, 5820.0]  # s/it
    _, its = read("lightning/2021_lightning_bar_running_loss.log")
    assert its[0].step_time_ms == pytest.approx(1000 / 13.47)  # it/s


def test_nemo_steps_exact_or_left_out_and_its_step_timing():
    _, nemo = read("lightning/2023_nemo_megatron_bar_s_per_it.log")
    assert (nemo[0].global_step, nemo[0].loss, nemo[0].step_time_ms) == (794, 3.09, 41360.0)
    _, rounded = read("lightning/2024_nemo_step_timing_sci_step.log")
    assert rounded[0].global_step is None and rounded[0].step_time_ms == 68700.0  # 2e+3 is not exact
    _, padded = read("lightning/2024_nemo_padded_step.log")
    assert padded[0].global_step == 5 and padded[0].loss == 11.5
    _, dpo = read("lightning/2025_neuron_dpo_bars.log")
    assert (dpo[0].grad_norm, dpo[0].learning_rate) == (8.6, 2.73e-5)
    _, printer = read("lightning/2025_nemo2_progress_printer.log")
    assert [r.global_step for r in printer] == [120, 121, 122, 123] and printer[0].step_time_ms == 31.46


def test_each_stream_is_detected_on_its_own():
    reader = LogReader(start=START)
    names = (
        "megatron/2024_stamped_moe.log",
        "torchtitan/2026_rank_prefixed.log",
        "lightning/2023_nemo_neuron_bars.log",
    )
    for name in names:
        for n, line in enumerate((LOGS / name).read_text().splitlines(), 1):
            reader.feed(LogLine(line, name, n))
    assert {s.parser.name for s in reader._streams.values()} == {"megatron", "torchtitan", "lightning"}


def test_lines_of_no_framework_are_counted_and_none_claims_them():
    noise = [
        "node-1:12:34 [0] NCCL INFO Channel 00/32 :    0   1   2   3",
        "{'loss': 'hinge', 'C': 0.1}",
        "loss_scale_window ............................... 1000",
        "Saving model at step 100 with loss 2.3",
        "step 3000: val loss 4.0427",
        "",
    ]
    reader = LogReader(start=START)
    assert [item for n, line in enumerate(noise) for item in reader.feed(LogLine(line, "x.log", n))] == []
    assert reader.stats.unknown == len(noise)
    for make in FRAMEWORKS.values():
        assert all(make().feed(line, 0.0) is None for line in noise)


def diagnosis(*names: str) -> dict:
    """``trainpulse replay`` of the fixtures through the real pipeline: the signals raised."""
    reader = LogReader(start=START)
    result = replay(read_logs([str(LOGS / n) for n in names], reader), stepper(), interval_s=1.0)
    return {t.signal: t for t in result.timeline if t.event == "raised"}


@pytest.mark.parametrize(
    "names",
    [
        ("megatron/2023_megatron_llm_bad_grad_norm.log",),
        ("megatron/2020_nan_no_colons.log",),
        ("huggingface/2024_minicpm_grad_norm_nan.log",),
        ("huggingface/2026_transformers5_quoted_values.log",),
    ],
)
def test_nonfinite_loss_is_raised_from_the_lines_alone(names):
    assert "nonfinite_loss" in diagnosis(*names)


def test_a_clean_log_raises_no_numerical_fault():
    raised = diagnosis("megatron/2024_stamped_moe.log", "torchtitan/2026_rank_prefixed.log")
    assert "nonfinite_loss" not in raised


def test_an_fp16_scaler_calibrating_from_two_to_the_32_is_no_fault():
    """ZeRO-1 from a loss scale of 2**32 skips 17 steps before one fits, then trains (loss 10.87 -> 10.64): the
    scaler's warm-up, which DeepSpeed does on every fp16 start, not a numerical fault."""
    raised = diagnosis("deepspeed/2023_zero1_overflow_startup.log")
    assert "nonfinite_loss" not in raised
