"""loss_spike and nonfinite_loss on hand-built frames, and numerical_instability through the whole pipeline."""

from __future__ import annotations

import random
from dataclasses import replace

from tests.diagnose.builders import T0, Harness, job
from tests.parts import pipeline
from trainpulse_otel.diagnose.detectors.nonfinite import NonfiniteLoss
from trainpulse_otel.diagnose.detectors.numerics import BASELINE_LOSSES, LossSpike
from trainpulse_otel.samples import LossPoint

NAN, INF = float("nan"), float("inf")


def healthy_loss(t: float, seed: int = 0) -> float:
    """A slowly declining power-law loss with ~1 % step-to-step noise, as an LLM's pretraining loss."""
    return expected_loss(t) + random.Random(f"{seed}:{t}:loss").gauss(0.0, 0.025)  # a str seed: the same every run


def expected_loss(t: float) -> float:
    """The healthy loss curve without its noise."""
    return 1.75 + 5.0 * (24000 + t) ** -0.18


def frame(t: float, loss: float | None = None, **training):
    return job(t, training={"loss": healthy_loss(t) if loss is None else loss, **training})


def test_a_healthy_noisy_declining_loss_never_spikes():
    h = Harness(LossSpike()).run(range(1800), frame)
    assert h.raised() == []
    assert h.detector.worst is None


def test_a_one_step_spike_is_raised_with_its_ratio_baseline_and_step_then_clears():
    h = Harness(LossSpike()).run(range(300), frame)
    spike_loss = 1.6 * healthy_loss(300)
    h.feed([frame(300, spike_loss)])
    (signal,) = h.active()
    h.run(range(301, 420), frame)
    raised = h.raised("loss_spike")
    assert [r.ts - T0 for r in raised] == [300]
    evidence = signal.evidence
    assert 1.5 < evidence["spike_ratio"] < 1.7
    assert abs(evidence["baseline_loss"] - expected_loss(300)) < 0.02  # the median of 128 noisy losses
    assert evidence["first_step"] == 24300 and "rank" not in evidence
    cleared = h.cleared("loss_spike")
    assert cleared and 330 <= cleared[0].ts - T0 <= 400  # remembered 30 s, then the 30 s hold-down


def test_a_spike_between_two_ticks_is_seen_from_the_frames_loss_stream():
    """The frame keeps only the newest report (a normal loss); the stream carries the spike before it."""
    h = Harness(LossSpike()).run(range(200), frame)
    f = frame(200)
    between = LossPoint(T0 + 199.5, 24199, 2.0 * healthy_loss(200))
    newest = LossPoint(T0 + 200, 24200, f.training.loss)
    h.feed([replace(f, losses=(between, newest))])
    assert [r.signal for r in h.raised()] == ["loss_spike"]
    assert h.active()[0].evidence["step"] == 24199


def test_non_finite_losses_never_enter_the_baseline():
    det = LossSpike()
    h = Harness(det).run(range(100), frame)
    before = det._series[None].median()
    h.run(range(100, 100 + BASELINE_LOSSES), lambda t: frame(t, NAN))
    assert det._series[None].median() == before and len(det._series[None]) == 100
    assert h.raised("loss_spike") == []


def test_a_spike_on_one_rank_names_that_rank():
    def ranked(t: float, spike: bool = False):
        f = frame(t)
        ranks = tuple(
            replace(r, loss=(2.2 if spike and r.rank == 3 else 1.0) * healthy_loss(t, seed=r.rank))
            for r in f.training.ranks
        )
        return replace(f, training=replace(f.training, ranks=ranks))

    h = Harness(LossSpike()).run(range(100), ranked)
    h.feed([ranked(100, spike=True)])
    (signal,) = h.active()
    assert signal.name == "loss_spike" and signal.evidence["rank"] == 3 and signal.evidence["spike_ratio"] > 2


def test_a_nan_loss_is_critical_at_once_with_the_first_step_and_count():
    h = Harness(NonfiniteLoss()).run(range(60), frame)
    assert h.raised() == []
    h.run(range(60, 70), lambda t: frame(t, NAN))
    raised = h.raised("nonfinite_loss")
    # raised on the first NaN; the state machine confirms critical on the second critical observation
    assert [(r.ts - T0, r.severity) for r in raised] == [(60, "warning"), (61, "critical")]
    (signal,) = h.active()
    assert signal.evidence["first_step"] == 24060 and signal.evidence["field"] == "loss"
    assert signal.evidence["nonfinite_count"] == 10
    h.run(range(70, 200), frame)  # the loss recovers (the framework skipped the steps)
    cleared = h.cleared("nonfinite_loss")
    assert cleared and 69 + 30 <= cleared[0].ts - T0 <= 69 + 30 + 60 + 2


def test_an_infinite_gradient_norm_or_a_rank_nan_is_non_finite_too():
    h = Harness(NonfiniteLoss()).run(range(10), frame)
    h.feed([frame(10, grad_norm=INF), frame(11)])  # judged with the report after it: no scaler skipped it
    assert h.active()[0].evidence["field"] == "grad_norm"
    f = frame(11)
    bad = tuple(replace(r, loss=NAN) if r.rank == 6 else r for r in f.training.ranks)
    g = Harness(NonfiniteLoss()).feed([replace(f, training=replace(f.training, ranks=bad))])
    assert g.active()[0].evidence["ranks"] == [6] and "rank(s) 6" in g.active()[0].message


def test_an_infinite_gradient_norm_the_scaler_then_skips_is_its_overflow_not_a_fault():
    """NVIDIA's fp16 optimizer (MLPerf GNMT): ``Gradient norm: inf``, then ``Skipped batch, new scale: 2048.0``."""
    h = Harness(NonfiniteLoss()).run(range(10), frame)
    for t in (10, 40, 70):
        h.feed([frame(t, grad_norm=INF), frame(t + 1, skipped_steps=1, loss_scale=2048.0)])
        h.run(range(t + 2, t + 30), frame)
    assert h.raised() == []
    nan = Harness(NonfiniteLoss()).run(range(10), frame)
    nan.feed([frame(10, grad_norm=NAN)])  # a NaN norm is no overflow's: judged at once
    assert nan.active()[0].evidence["field"] == "grad_norm"


def test_fp16_overflows_now_and_then_are_normal_but_many_in_a_row_are_a_fault():
    occasional = Harness(NonfiniteLoss()).run(
        range(300), lambda t: frame(t, skipped_steps=1 if int(t) % 50 == 0 else 0, loss_scale=65536.0)
    )
    assert occasional.raised() == []
    in_a_row = Harness(NonfiniteLoss()).run(range(12), lambda t: frame(t, skipped_steps=1 if t >= 4 else 0))
    raised = in_a_row.raised("nonfinite_loss")
    assert raised and raised[0].ts - T0 == 7  # the 4th skipped step in a row after steps went through
    (signal,) = in_a_row.active()
    assert signal.evidence["field"] == "skipped_steps" and signal.evidence["skipped_in_a_row"] == 8
    collapsed = Harness(NonfiniteLoss()).run(range(5), lambda t: frame(t, loss_scale=2.0 ** (16 - 8 * t)))
    assert collapsed.active()[0].evidence["field"] == "loss_scale"  # 65536, 256, then at its floor of 1


def test_a_fresh_fp16_scaler_calibrating_is_no_fault():
    # DeepSpeed from an initial scale of 2**32 skips ~17 steps at the start until a scale fits (tests/fixtures/logs)
    warmup = Harness(NonfiniteLoss()).run(
        range(40), lambda t: frame(t, skipped_steps=1 if t < 17 else 0, loss_scale=2.0 ** (32 - min(t, 17)))
    )
    assert warmup.raised() == []


def test_a_run_of_skips_that_begins_below_any_initial_scale_is_past_the_warm_up():
    # the first lines of an excerpt: the scale halving from 128 (DeepSpeed's OVERFLOW! storm under a tqdm bar)
    storm = Harness(NonfiniteLoss()).run(range(6), lambda t: frame(t, skipped_steps=1, loss_scale=128.0 / 2**t))
    assert storm.raised("nonfinite_loss") and storm.active()[0].evidence["field"] == "skipped_steps"
    warmup = Harness(NonfiniteLoss()).run(range(6), lambda t: frame(t, skipped_steps=1, loss_scale=65536.0 / 2**t))
    assert warmup.raised() == []  # from 2**16: a fresh scaler calibrating


def test_a_loss_scale_that_was_never_dynamic_is_no_collapse():
    # bf16 jobs have no loss scaler: Megatron's iteration line still prints "loss scale: 1.0" on every step
    bf16 = Harness(NonfiniteLoss()).run(range(30), lambda t: frame(t, loss_scale=1.0))
    assert bf16.raised() == []


def test_the_pipeline_names_numerical_instability_and_books_the_nan_steps_as_badput():
    p = pipeline()
    for t in range(240):
        p.update(frame(float(t)))
    assert p.diagnosis.signals == ()
    for t in range(240, 300):
        p.update(frame(float(t), NAN))
    d = p.diagnosis
    assert "nonfinite_loss" in {s.name for s in d.signals}
    top = d.root_causes[0]
    assert top.cause == "numerical_instability" and top.confidence > 0.5
    assert "rewind to the last checkpoint" in top.remediation.lower() and "learning rate" in top.remediation
    badput = d.goodput.badput_s["numerical_instability"]
    # 60 one-step reports a second apart, all of it lost: the 60 s of wall time they cover, never more (each
    # claims a ~1.7 s step, more than the second it covers), less the earlier claims (at most two steps) first
    assert 60.0 - 2 * 1.8 < badput <= 60.0 + 1e-6


def test_a_negative_loss_spikes_by_its_distance_and_has_no_ratio():
    """A DPO-style objective below zero: judged by the same rule, its evidence carries no meaningless ratio."""
    h = Harness(LossSpike()).run(range(100), lambda t: frame(t, -healthy_loss(t)))
    h.feed([frame(100, -0.5 * healthy_loss(100))])
    (signal,) = h.active()
    assert signal.evidence["spike_ratio"] is None and signal.evidence["spike_sigmas"] > 6
    assert "above its rolling median" in signal.message


def short_excerpt(history: int, jump: float, noise: float = 0.025) -> list[str]:
    """``history`` noisy losses around 3.2, then one ``jump`` × it (an excerpt of a record's log), then two more."""
    rng = random.Random(f"excerpt:{history}:{noise}")
    losses = [3.2 + rng.gauss(0.0, noise) for _ in range(history)] + [3.2 * jump, 3.2, 3.21]
    h = Harness(LossSpike()).run(range(len(losses)), lambda t: frame(float(t), losses[int(t)]))
    return [r.signal for r in h.raised()]


def test_two_dozen_steps_are_enough_to_see_a_one_step_jump_short_of_doubling():
    assert short_excerpt(22, 1.6) == ["loss_spike"]  # past 6 x sqrt(32/22) sigmas: judged by the spread
    assert short_excerpt(12, 1.6) == []  # fewer than mid_history: it must double its median
    assert short_excerpt(12, 2.2) == ["loss_spike"]
    assert short_excerpt(22, 1.6, noise=0.4) == []  # a loss this noisy moves that much: no spike


def test_a_jump_back_up_in_a_loss_falling_over_orders_of_magnitude_is_a_spike():
    """A regression's MSE falling 1e14 -> 1e4 keeps its rolling median and MAD far above where it stands."""
    rng = random.Random("decay")
    falling = [1e14 * 10 ** (-t / 4) * rng.uniform(0.5, 2.0) for t in range(40)]  # ~1e4 at the end
    h = Harness(LossSpike()).run(range(40), lambda t: frame(float(t), falling[int(t)]))
    assert h.raised() == []  # falling fast and noisily is no spike
    h.feed([frame(40.0, 100 * falling[-1])])
    (signal,) = h.active()
    assert signal.evidence["baseline_loss"] < 1e6 < 1e9 < sorted(falling)[20]  # the last 8's median, not all 40's
    assert 4 < signal.evidence["spike_ratio"] < 100


def test_a_run_starting_again_at_an_earlier_step_is_judged_against_its_own_losses():
    """A sweep's next trial (lmqg's grid search: global step 1450, loss 0.45, then step 50, loss 0.80) starts from
    its own initial loss; ranks interleaving a step or two back are the same run."""
    settled = [(50 * (i + 1), 0.45 + 0.01 * (i % 3)) for i in range(40)]
    again = [(50, 0.80), (100, 0.69), (150, 0.74)]
    points = settled + again
    h = Harness(LossSpike()).run(
        range(len(points)), lambda t: frame(float(t), points[int(t)][1], global_step=points[int(t)][0])
    )
    assert h.raised() == []
    back_one = [*settled, (1999, 0.90)]  # one step back, then a loss double its level: the same run's spike
    h = Harness(LossSpike()).run(
        range(len(back_one)), lambda t: frame(float(t), back_one[int(t)][1], global_step=back_one[int(t)][0])
    )
    assert [r.signal for r in h.raised()] == ["loss_spike"]


def test_an_infinite_norm_before_any_finite_one_that_the_next_report_leaves_is_the_scaler_s_warm_up():
    """The Hugging Face Trainer under fp16 logs ``{'loss': 18.2196, 'grad_norm': inf, …}`` at its first logging step
    (torch.amp's scaler starts at 2**16 and skips its first overflows), then finite norms (the corpus's train
    split); the same infinity after a finite norm is a fault."""
    h = Harness(NonfiniteLoss())
    h.feed([frame(0, grad_norm=INF), frame(1, grad_norm=0.71)])
    h.run(range(2, 40), lambda t: frame(t, grad_norm=0.5))
    assert h.raised() == []
    late = Harness(NonfiniteLoss())
    late.feed([frame(0, grad_norm=0.71), frame(1, grad_norm=INF), frame(2, grad_norm=0.6)])
    assert late.active()[0].evidence["field"] == "grad_norm"


def test_an_evaluation_s_progress_between_a_warm_up_overflow_and_the_next_report_says_nothing_of_it():
    """MMEngine under AMP logs ``grad_norm: inf  loss: 2.3210`` at epoch 1's end, then ``Epoch(val) [1][4/4]`` (a
    report of progress only), then epoch 2's finite norm: the warm-up's overflow, no fault. A tick with no report
    at all after it still judges the infinity (the job's last word)."""
    h = Harness(NonfiniteLoss())
    h.feed([frame(0, 2.32, grad_norm=INF), job(1, training={"global_step": 4}), frame(2, 2.14, grad_norm=4.24)])
    h.run(range(3, 40), lambda t: frame(t, 2.0, grad_norm=4.0))
    assert h.raised() == []
    last = Harness(NonfiniteLoss())
    last.feed([frame(0, 2.32, grad_norm=INF), job(1, with_training=False)])
    assert last.active()[0].evidence["field"] == "grad_norm"
