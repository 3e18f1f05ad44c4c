"""Latest samples: job reports replace (their description holds until changed), ranks merge by rank, both expire."""

from hypothesis import given, settings
from hypothesis import strategies as st

from trainpulse_otel.samples import RANK_PARTS, RankSample, TrainingSample, carried_parts, merged_rank
from trainpulse_otel.telemetry.latest import LatestSamples


def _rank(r, ms=100.0):
    return RankSample(rank=r, step_time_ms=ms)


def test_missing_timestamp_is_stamped_with_receipt_time():
    latest = LatestSamples()
    latest.put_training(TrainingSample(step_time_ms=5.0), now=50.0)
    assert latest.current().training.timestamp == 50.0


def test_job_report_replaces_the_previous_one_whole():
    latest = LatestSamples()
    latest.put_training(TrainingSample(step_time_ms=5.0, checkpoint_ms=30_000.0), now=1.0)
    latest.put_training(TrainingSample(step_time_ms=6.0), now=2.0)
    assert latest.current().training.checkpoint_ms is None  # a one-off field does not linger


def test_the_job_s_description_holds_until_a_report_changes_it():
    latest = LatestSamples()
    latest.put_training(TrainingSample(step_time_ms=5.0, model_name="llama-3-8b", precision="bf16", world_size=8), 1.0)
    latest.put_training(TrainingSample(step_time_ms=6.0, loss=2.1), now=2.0)  # a later report that says less
    held = latest.current().training
    assert (held.model_name, held.precision, held.world_size, held.loss) == ("llama-3-8b", "bf16", 8, 2.1)
    latest.put_training(TrainingSample(step_time_ms=6.0, model_name="llama-3-70b"), now=3.0)  # a new name wins
    assert latest.current().training.model_name == "llama-3-70b"


def test_ranks_merge_across_reports_and_rank_only_reports_keep_the_job_view():
    latest = LatestSamples()
    latest.put_training(TrainingSample(step_time_ms=5.0, ranks=(_rank(0), _rank(1))), now=1.0)
    latest.put_training(TrainingSample(ranks=(_rank(1, 120.0), _rank(2))), now=2.0)
    t = latest.current().training
    assert t.step_time_ms == 5.0
    assert [(r.rank, r.step_time_ms) for r in t.ranks] == [(0, 100.0), (1, 120.0), (2, 100.0)]


def test_stale_ranks_and_jobs_expire():
    latest = LatestSamples(stale_after_s=10.0)
    latest.put_training(TrainingSample(step_time_ms=5.0, ranks=(_rank(0), _rank(1))), now=0.0)
    latest.put_training(TrainingSample(ranks=(_rank(1),)), now=8.0)
    latest.expire(now=12.0)
    t = latest.current().training
    assert [r.rank for r in t.ranks] == [1] and t.step_time_ms is None
    latest.expire(now=30.0)
    assert latest.current().training is None


def test_observations_are_cached_until_a_change():
    latest = LatestSamples()
    latest.put_training(TrainingSample(step_time_ms=5.0), now=0.0)
    first = latest.observations()
    assert latest.observations() is first
    latest.put_training(TrainingSample(step_time_ms=6.0), now=1.0)
    assert latest.observations() is not first


def test_tracked_ranks_are_capped_oldest_first():
    latest = LatestSamples(max_ranks=4)
    for r in range(10):  # a sender that invents a new rank number every report
        latest.put_training(TrainingSample(ranks=(_rank(r),)), now=float(r))
    assert [r.rank for r in latest.current().training.ranks] == [6, 7, 8, 9]


def test_a_heartbeat_keeps_a_ranks_measurements_and_a_measurement_keeps_its_heartbeat():
    latest = LatestSamples(stale_after_s=10.0)
    latest.put_training(
        TrainingSample(step_time_ms=5.0, ranks=(RankSample(rank=0, gpu_index=0, step_time_ms=90.0),)), 1.0
    )
    beat = RankSample(rank=0, global_step=41, phase="all_reduce", phase_since=3.0, pid=77)
    latest.put_training(TrainingSample(ranks=(beat,)), now=4.0)
    (r,) = latest.current().training.ranks
    assert (r.step_time_ms, r.gpu_index, r.global_step, r.phase, r.pid) == (90.0, 0, 41, "all_reduce", 77)
    latest.put_training(TrainingSample(ranks=(RankSample(rank=0, step_time_ms=95.0),)), now=5.0)
    (r,) = latest.current().training.ranks
    assert (r.step_time_ms, r.phase, r.gpu_index) == (95.0, "all_reduce", 0)
    assert latest.current().training.step_time_ms == 5.0  # heartbeats never replace the job's report


def test_heartbeats_keep_a_blocked_rank_alive_past_stale_after():
    latest = LatestSamples(stale_after_s=10.0)
    latest.put_training(TrainingSample(ranks=(_rank(0), _rank(1))), now=0.0)
    for now in range(3, 30, 3):  # rank 1 beats every 3 s, rank 0 went silent
        latest.put_training(TrainingSample(ranks=(RankSample(rank=1, global_step=5, phase="sync"),)), now=float(now))
        latest.expire(float(now))
    assert [r.rank for r in latest.current().training.ranks] == [1]


PART_VALUES = {
    "measurements": {"step_time_ms": 95.0, "sync_wait_ms": 3.0},
    "heartbeat": {"global_step": 7, "phase": "sync", "pid": 41},
    "identity": {"gpu_index": 2, "hostname": "node-1"},
}


@st.composite
def _reports(draw: st.DrawFn) -> list[tuple[RankSample, ...]]:
    """Reports whose ranks carry some parts each: mostly the same parts across a report, sometimes not, with
    repeated ranks in one report too (nothing upstream of the store has to rule them out)."""
    reports = []
    for _ in range(draw(st.integers(1, 5))):
        shared = draw(st.sets(st.sampled_from(sorted(RANK_PARTS))))
        ranks = []
        for _ in range(draw(st.integers(1, 5))):
            parts = shared if draw(st.integers(0, 3)) else draw(st.sets(st.sampled_from(sorted(RANK_PARTS))))
            fields = {k: v for part in parts for k, v in PART_VALUES[part].items()}
            ranks.append(RankSample(rank=draw(st.integers(0, 3)), **fields))
        reports.append(tuple(ranks))
    return reports


@settings(max_examples=300, deadline=None)
@given(reports=_reports())
def test_ranks_merge_as_each_entry_merged_in_turn(reports):
    latest, expected = LatestSamples(), {}
    for now, ranks in enumerate(reports):
        latest.put_training(TrainingSample(ranks=ranks), now=float(now))
        for rank in ranks:  # the merge, one entry after another
            old = expected.get(rank.rank)
            expected[rank.rank] = rank if old is None else merged_rank(old, rank)
    assert latest.current().training.ranks == tuple(expected[r] for r in sorted(expected))


def test_every_and_some_parts_of_a_report():
    ranks = (RankSample(rank=0, step_time_ms=1.0, gpu_index=0), RankSample(rank=1, step_time_ms=2.0, phase="sync"))
    every, some = carried_parts(ranks)
    assert every == {"measurements"}
    assert some == {"measurements", "heartbeat", "identity"}
    assert carried_parts(()) == (frozenset(RANK_PARTS), frozenset())
