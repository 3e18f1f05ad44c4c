"""The shared signal state machine: persistence before a raise, hysteresis and hold-down before a clear."""

from __future__ import annotations

from trainpulse_otel.diagnose.tracker import SignalTracker
from trainpulse_otel.diagnose.types import Finding, Policy

POLICY = Policy(raise_evidence=2.5, min_observations=2, hold=0.75, clear_after_s=20.0, stale_after_s=60.0)


def run(scores, policy=POLICY, severity="warning", subject=None):
    """Observe one score per second; return the transitions as (t, event, severity)."""
    tracker, out = SignalTracker(), []
    for t, score in enumerate(scores):
        found = [] if score is None else [Finding("sig", score, severity, f"s={score}", subject or {})]
        tracker.observe(0, found, policy, float(t))
        tracker.expire(float(t))
        out += [(t.ts, t.event, t.severity) for t in tracker.drain()]
    return out, tracker


def test_one_noisy_observation_never_raises():
    out, _ = run([0, 0, 5.0, 0, 0, 0])
    assert out == []


def test_a_marginal_fault_needs_three_observations_a_clear_one_two():
    assert run([0, 1.0, 1.0, 1.0, 1.0])[0][0] == (3.0, "raised", "warning")
    assert run([0, 1.5, 1.5, 1.5])[0][0] == (2.0, "raised", "warning")


def test_an_interrupted_run_starts_over():
    out, _ = run([1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    assert out == []


def test_hysteresis_holds_and_hold_down_clears_once():
    scores = [2.0] * 5 + [0.8] * 30 + [0.5] * 25 + [2.0, 0.5, 0.5]
    out, _ = run(scores)
    events = [e for _, e, _ in out]
    assert events == ["raised", "cleared"]
    assert out[1][0] == 35 + 20  # below hold from t=35, cleared 20 s later; the blip at 60 is one observation


def test_no_flapping_around_the_threshold():
    out, _ = run([1.5, 1.5] + [0.9, 1.1] * 50)
    assert [e for _, e, _ in out] == ["raised"]


def test_critical_escalates_with_a_second_raised_event_and_deescalates_silently():
    policy = Policy(clear_after_s=5.0)
    tracker, out = SignalTracker(), []
    plan = [("warning", 2.0)] * 3 + [("critical", 3.0)] * 3 + [("warning", 1.5)] * 30
    for t, (sev, score) in enumerate(plan):
        tracker.observe(0, [Finding("sig", score, sev)], policy, float(t))
        out += tracker.drain()
        if t == 5:
            assert tracker.signals()[0].severity == "critical"
    assert [(x.event, x.severity) for x in out] == [("raised", "warning"), ("raised", "critical")]
    assert tracker.signals()[0].severity == "warning"


def test_keys_are_per_subject_and_an_unmentioned_key_scores_zero():
    tracker = SignalTracker()
    a, b = {"gpu_index": 1}, {"gpu_index": 2}
    for t in range(3):
        tracker.observe(0, [Finding("sig", 2.0, subject=a), Finding("sig", 2.0, subject=b)], POLICY, float(t))
    for t in range(3, 40):
        tracker.observe(0, [Finding("sig", 2.0, subject=a)], POLICY, float(t))
    assert [s.subject for s in tracker.signals()] == [a]
    assert [(x.event, dict(x.subject)) for x in tracker.drain()][-1] == ("cleared", b)


def test_no_new_evidence_holds_state_and_stale_keys_clear():
    tracker = SignalTracker()
    for t in range(3):
        tracker.observe(0, [Finding("sig", 2.0)], POLICY, float(t))
    for t in range(3, 50):  # the detector had nothing to say (None): the signal holds
        tracker.expire(float(t))
    assert len(tracker.signals()) == 1
    tracker.expire(70.0)
    assert tracker.signals() == ()
    assert [x.event for x in tracker.drain()] == ["raised", "cleared"]


def test_since_is_the_start_of_the_episode_and_evidence_is_the_latest():
    tracker = SignalTracker()
    for t, score in enumerate([1.0, 1.2, 1.4, 3.0]):
        tracker.observe(0, [Finding("sig", score, evidence={"x": score})], POLICY, 100.0 + t)
    signal = tracker.signals()[0]
    assert signal.since == 100.0 and signal.evidence == {"x": 3.0}


def test_a_held_signal_says_what_its_latest_finding_says():
    tracker = SignalTracker()
    for t, score in enumerate([2.0, 2.0, 0.9, 0.8]):  # raised, then held below the raise level
        tracker.observe(0, [Finding("sig", score, message=f"at {score}", evidence={"x": score})], POLICY, float(t))
    signal = tracker.signals()[0]
    assert signal.message == "at 0.8" and signal.evidence == {"x": 0.8}


def test_an_unmentioned_key_scores_zero_even_when_the_detector_mentions_others():
    # rank 2 hovers below the raise level every tick; rank 1 recovered and is no longer mentioned
    tracker, events = SignalTracker(), []
    one, two = {"rank": 1}, {"rank": 2}
    for t in range(3):
        tracker.observe(0, [Finding("sig", 2.0, subject=one)], POLICY, float(t))
    for t in range(3, 40):
        tracker.observe(0, [Finding("sig", 0.7, subject=two)], POLICY, float(t))
        events += [(x.ts, x.event, dict(x.subject)) for x in tracker.drain()]
    assert events[-1] == (3.0 + 20.0, "cleared", one) and tracker.signals() == ()
