"""A line that comes back with its step, epoch or iteration counter climbing is progress, whatever its shape."""

from __future__ import annotations

import pytest

from tests.logs.excerpts import excerpt_signals, reports
from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.logs.counters import MAX_SHAPES, SIGHTINGS, ProgressCounters
from trainpulse_otel.samples import TrainingSample


def steps(lines: list[str]) -> list[int | None]:
    counters = ProgressCounters()
    return [counters.step(line) for line in lines]


@pytest.mark.parametrize(
    ("shape", "numbers"),
    [
        ("current step: {}th step", (3, 7, 11, 15)),  # TensorFlow's speaker-verification script (train split)
        ("[INFO] epoch {}", (0, 1, 2, 3)),
        ("step_idx:{}, test_reward:32.6", (1400, 3000, 4600, 6200)),  # an A2C loop
        ("                    Learning iteration {}/101", (98, 99, 100, 101)),  # rsl_rl
        ("objective function for 'output' for minibatches {}-99 is -44.3953 over", (70, 80, 90, 99)),  # Kaldi
        ("(:epoch, {}, :trn, 0.9843, :tst, 0.9812)", (1, 2, 3, 4)),  # Knet
        ("ÉPOCA {}/5", (1, 2, 3, 4)),
    ],
)
def test_a_shape_whose_named_counter_grows_is_progress_from_its_third_sighting(shape, numbers):
    told = steps([shape.format(n) for n in numbers])
    assert told == [None] * (SIGHTINGS - 1) + list(numbers[SIGHTINGS - 1 :])


@pytest.mark.parametrize(
    "lines",
    [
        [f"[Rank {r}] model loaded" for r in range(4)],  # ranks side by side
        [f"model.layers.{i}.self_attn.q_proj.weight: torch.Size([4096, 4096])" for i in range(4)],
        [f"[sqlite] Inserted {n} lines" for n in (4000000, 8000000, 16000000, 32000000)],  # data, not training
        [f"Training for: 100 {n}" for n in (25, 50, 75, 100)],  # a grid's settings
        ["epoch 3 done", "epoch 3 done", "epoch 3 done", "epoch 3 done"],  # no counter grows
    ],
)
def test_enumerations_and_counts_of_other_things_are_no_progress(lines):
    assert steps(lines) == [None] * len(lines)


def test_a_counter_that_falls_starts_its_shape_over():
    told = steps([f"epoch {n}, minibatch 10/20" for n in (1, 2, 3, 1, 2, 3, 4)])
    assert told == [None, None, 3, None, None, 3, 4]


def test_of_several_counters_the_one_that_keeps_growing_is_the_step():
    lines = ["fps step: 900 epoch: 1/100", "fps step: 950 epoch: 2/100", "fps step: 920 epoch: 3/100"]
    assert steps([*lines, "fps step: 990 epoch: 4/100"]) == [None, None, 3, 4]


def test_its_memory_is_bounded():
    counters = ProgressCounters()
    for n in range(MAX_SHAPES + 10):
        counters.step(f"step {n} of {'x' * (n % 97)} {'y' * (n // 97)}")
    assert len(counters) <= MAX_SHAPES


def test_a_console_no_reader_knows_is_read_as_its_counters_steps():
    """The train split's TensorFlow speaker-verification run prints only ``current step: 3th step``: 72 reports."""
    told = reports("tensorflow_healthy_ti-sv-speaker-verification.log")
    assert len(told) == 72 and [r.global_step for r in told[:3]] == [3, 4, 5]
    assert all(r.loss is None for r in told)


def test_a_stream_another_reader_reports_from_is_that_reader_s_alone():
    reader = LogReader()
    lines = [f"[INFO] epoch {n}" for n in range(4)] + ["iter 10: loss 2.31, time 100.0ms", "[INFO] epoch 4"]
    told = [o for n, text in enumerate(lines, 1) for o in reader.feed(LogLine(text, "run.log", n))]
    assert [o.global_step for o in told if isinstance(o, TrainingSample)] == [2, 3, 10]


def test_the_counters_pace_gives_way_to_the_reader_s_own(tmp_path):
    """The train split's Marian excerpt: ``Starting data epoch 55`` every 30 s, then Marian's own updates 200 s
    apart — the counters' 13 s between the last epoch line and the first update is no pace to judge a silence by."""
    seen = excerpt_signals(
        "marian_out_of_memory_transformer-2gpu-valid-after-up5000-cuda-error-2-call-stack.log", tmp_path
    )
    assert "out_of_memory" in seen and "training_stalled" not in seen
