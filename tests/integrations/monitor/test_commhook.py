"""The DDP communication hook: a real (one-process gloo) DDP model's gradient all-reduce marks ``all_reduce``
in the heartbeat's phase and puts it back; gradients are what DDP makes without it; other models are left alone."""

from __future__ import annotations

import threading
from time import perf_counter

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from trainpulse_otel import TrainingMonitor  # noqa: E402
from trainpulse_otel.integrations.monitor.commhook import AllReduceMarker, ddp_all_reduce_marked  # noqa: E402
from trainpulse_otel.integrations.monitor.recorder import StepRecorder  # noqa: E402


@pytest.fixture
def gloo():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(256, 256) for _ in range(6)))


class Spy(AllReduceMarker):
    """The marker, noting the phase each bucket's launch leaves the recorder in."""

    seen: list[str]

    def launched(self) -> None:
        super().launched()
        self.seen.append(self._recorder.now[0])


def test_ddp_backward_marks_all_reduce_and_puts_the_phase_back(gloo):
    recorder = StepRecorder()
    ddp = torch.nn.parallel.DistributedDataParallel(_model(), bucket_cap_mb=0.1)
    marker = Spy(recorder, ddp.process_group)
    marker.seen = []
    ddp.register_comm_hook(ddp.process_group, marker.hook)
    step = ("compute", perf_counter())
    recorder.now = step
    plain = _model()
    for _ in range(2):  # DDP's first pass runs one bucket; it splits them by bucket_cap_mb from the second on
        x = torch.randn(8, 256)
        ddp(x).sum().backward()
        plain(x).sum().backward()
    assert marker.buckets >= 3 and marker.in_flight == 0  # several buckets, all completed
    assert set(marker.seen) == {"all_reduce"}
    assert recorder.now == step  # back to the step's compute, since its start
    for mine, theirs in zip(ddp.module.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad)  # averaged over a world of one: unchanged


def test_the_monitor_registers_the_hook_for_a_ddp_model_only(gloo):
    ddp = torch.nn.parallel.DistributedDataParallel(_model())
    with TrainingMonitor(model=ddp, hardware="none", interval=3600) as monitor:
        assert monitor._all_reduce is not None and ddp._comm_hooks
        with monitor.step():
            ddp(torch.randn(4, 256)).sum().backward()
        assert monitor._all_reduce.buckets >= 1
    with TrainingMonitor(model=_model(), hardware="none", interval=3600) as monitor:
        assert monitor._all_reduce is None


def test_mark_all_reduce_false_registers_nothing(gloo):
    ddp = torch.nn.parallel.DistributedDataParallel(_model())
    with TrainingMonitor(model=ddp, hardware="none", interval=3600, mark_all_reduce=False) as monitor:
        assert monitor._all_reduce is None and not ddp._comm_hooks


def test_a_model_with_its_own_hook_is_left_alone(gloo, caplog):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    ddp = torch.nn.parallel.DistributedDataParallel(_model())
    ddp.register_comm_hook(ddp.process_group, allreduce_hook)
    with caplog.at_level("INFO"):
        assert ddp_all_reduce_marked(ddp, StepRecorder()) is None
    assert [h for h, _ in ddp._comm_hooks] == [allreduce_hook]
    assert "already has a communication hook" in caplog.text


def test_buckets_completing_on_other_threads_unmark_once_the_last_is_done():
    recorder = StepRecorder()
    step = ("compute", 1.0)
    recorder.now = step
    marker = AllReduceMarker(recorder, None)
    for _ in range(64):
        marker.launched()
    assert recorder.now[0] == "all_reduce"
    threads = [threading.Thread(target=marker.completed) for _ in range(63)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert recorder.now[0] == "all_reduce" and marker.in_flight == 1
    marker.completed()
    assert recorder.now == step and marker.buckets == 64


def test_a_phase_the_loop_entered_meanwhile_is_not_overwritten():
    recorder = StepRecorder()
    recorder.now = ("compute", 1.0)
    marker = AllReduceMarker(recorder, None)
    marker.launched()
    recorder.now = ("optimizer", 2.0)  # e.g. an optimizer in backward hooks
    marker.completed()
    assert recorder.now == ("optimizer", 2.0)


def test_a_ddp_model_on_the_python_reducer_is_left_alone(gloo):
    ddp = torch.nn.parallel.DistributedDataParallel(_model())
    ddp._use_python_reducer = True  # what compiled autograd's DDP mode sets: its hooks get (grad, param)
    assert ddp_all_reduce_marked(ddp, StepRecorder()) is None and not ddp._comm_hooks
