"""Launchers' labels (srun's task, Ray's actor, pdsh's host) and a collector's stamp before every line: the line
is read as the trainer printed it, the same events and reports as without them."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.logs.excerpts import TRAIN
from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.logs.labels import prompt_host, split_label, without_label
from trainpulse_otel.logs.lines import split_glog, split_prefixes
from trainpulse_otel.samples import PROGRESS_GAP, LogEvent, TrainingSample


@pytest.mark.parametrize(
    ("text", "task", "rest"),
    [
        ("0: iteration 5 | lm loss: 2.1", 0, "iteration 5 | lm loss: 2.1"),
        (" 3: Traceback (most recent call last):", 3, "Traceback (most recent call last):"),
        (
            "11: [rank11]:[E617 15:17:35.519071987 x.cpp:681] boom",
            11,
            "[rank11]:[E617 15:17:35.519071987 x.cpp:681] boom",
        ),
        ("(RayTrainWorker pid=4321, ip=10.0.0.5) loss: 2.0", None, "loss: 2.0"),
        ("(pid=4321) RuntimeError: x", None, "RuntimeError: x"),
        ("(raylet, ip=10.0.0.5) A worker died", None, "A worker died"),
        ("(WorkerDict pid=9) step:3 - loss:1.0 [repeated 7x across cluster]", None, "step:3 - loss:1.0"),
        ("worker-5: [2024-01-01 10:00:00,000] [INFO] x", None, "[2024-01-01 10:00:00,000] [INFO] x"),
        ("10.0.0.5: Killed", None, "Killed"),
        ("trainer-1  | loss: 2.0", None, "loss: 2.0"),  # Docker Compose's service
        ("[pod/trainer-worker-0/pytorch] Killed", None, "Killed"),  # kubectl logs --prefix
        ("> Killed", None, "Killed"),  # a log quoted in a reply
        ("> > 0: iteration 5", 0, "iteration 5"),
        (">", None, ""),
    ],
)
def test_a_launcher_s_label_is_cut_and_srun_s_task_kept(text, task, rest):
    assert split_label(text) == (task, rest)


@pytest.mark.parametrize(
    "text",
    [
        ">>> import torch",
        ">loss 2",
        "step10: loss 2.3",
        "RuntimeError: x",
        "node001: x",
        "Epoch 1: loss 0.3",
        "frame #0: c10::Error",
        "10:17:00 x",
        "E-01 | loss scale: 1.0 | grad norm: 0.214 |",  # a Megatron line a terminal wrapped inside a number
    ],
)
def test_a_line_s_own_words_are_no_label(text):
    assert split_label(text) == (None, text)


def test_a_collector_s_stamp_keeps_the_glog_level_and_the_line_s_own_indent():
    stamped = "2024-05-01T10:00:00.123456789Z W0618 21:57:02.561000 1489278 torch/_dynamo/x.py:1277]     raise X"
    _, when, rest = split_prefixes(stamped)
    assert when == pytest.approx(1714557600.123456) and split_glog(rest) == ("W", "    raise X")
    assert split_prefixes('2024-05-01T10:00:00Z   File "x.py", line 3')[2] == '  File "x.py", line 3'
    fatal = "F0618 21:57:02.561000 1489278 x.cpp:12] Check failed: ok"
    assert split_glog(fatal) == ("F", fatal)  # a FATAL keeps its prefix: the process aborts
    assert split_glog("Iteration 5") == (None, "Iteration 5")


def read(name: str, wrap: Callable[[int, str], str]) -> tuple[list[tuple[str, int | None]], int]:
    """The events (kind, rank) and the count of reports the reader tells of ``name`` with ``wrap`` on every line."""
    reader = LogReader()
    lines = (TRAIN / name).read_text(encoding="utf-8").splitlines()
    out = [o for n, text in enumerate(lines, 1) for o in reader.feed(LogLine(wrap(n, text), "excerpt.log", n))]
    out += reader.flush()
    events = [(o.kind, o.rank) for o in out if isinstance(o, LogEvent)]
    return events, sum(isinstance(o, TrainingSample) for o in out)


WRAPS: dict[str, Callable[[int, str], str]] = {
    "ray": lambda n, text: f"(RayTrainWorker pid=4321, ip=10.0.0.5) {text}",
    "pdsh": lambda n, text: f"worker-5: {text}",
    "kubectl --timestamps": lambda n, text: f"2024-05-01T10:00:00.{n:09d}Z {text}",
    "Markdown quote": lambda n, text: f"> {text}",
}


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize(
    "name",
    [
        "torchrun_rank_crashed_grpo-sigkill-table.log",
        "colossalai_rank_crashed_gemini-gpt-childfailed.log",
        "easylm_out_of_memory_llama13b-v3-8-pjrt-resource-exhausted-wrapped.log",
        "nemo2_healthy_evo2-dynamo-inductor-warning-traceback-then-10-iterations.log",
        "openocr_rank_crashed_train-rec-sigbus-table.log",
    ],
)
def test_a_labelled_or_collected_log_tells_what_the_bare_log_tells(name, wrap):
    bare_events, bare_reports = read(name, lambda n, text: text)
    events, reports = read(name, WRAPS[wrap])
    failures = [kind for kind, _ in events if kind != PROGRESS_GAP]  # (a silence is the stall detector's to judge,
    assert failures == [kind for kind, _ in bare_events if kind != PROGRESS_GAP]  # by the time a collector gives)
    assert bool(failures) == ("_healthy_" not in name)  # a failure told either way; nothing raised on a healthy log
    assert (reports > 0) == (bare_reports > 0)


def test_srun_s_task_is_the_rank_where_the_lines_name_none():
    name = "keras_nonfinite_loss_gumbel-softmax-cnn-epoch26-loss-nan.log"
    bare_events, bare_reports = read(name, lambda n, text: text)
    events, reports = read(name, lambda n, text: f"0: {text}" if n % 2 else f" 0: {text}")
    assert events == bare_events and reports == bare_reports  # one task's lines, its label padded or not
    reader = LogReader()
    crash = ["3: Traceback (most recent call last):", '3:   File "train.py", line 9, in <module>', "3: ValueError: bad"]
    told = [o for n, text in enumerate(crash, 1) for o in reader.feed(LogLine(text, "slurm-42.out", n))]
    told += reader.flush()
    assert [(o.kind, o.rank) for o in told if isinstance(o, LogEvent)][:1] == [("process_failed", 3)]


def test_journald_s_prefix_is_cut_and_its_yearless_clock_is_the_line_s_time():
    reader = LogReader()
    lines = [
        "Dec  7 05:33:48 gpu-node-3 python[1234]: iter 1: loss 2.31, time 100.0ms",
        "Dec  7 05:33:49 gpu-node-3 python[1234]: iter 2: loss 2.29, time 100.0ms",
        "Dec  7 05:35:49 gpu-node-3 python[1234]: RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    told = [o for n, text in enumerate(lines, 1) for o in reader.feed(LogLine(text, "journal.log", n))]
    reports = [o for o in told if isinstance(o, TrainingSample)]
    assert [r.global_step for r in reports] == [1, 2] and reports[1].timestamp - reports[0].timestamp == 1.0
    crash = [o for o in told if isinstance(o, LogEvent)]
    assert crash[0].kind == "process_failed" and crash[0].ts - reports[1].timestamp == 120.0


def test_a_journal_s_host_is_the_host_of_its_failures():
    """A kernel log pasted from ``journalctl -k`` or ``/var/log/syslog``: each line names the host that wrote it, the
    host an XID's fault is on."""
    line = "Aug 26 15:28:16 ailcm-ai1 kernel: [87474.8] NVRM: Xid (PCI:0000:17:00): 79, pid=1234, GPU has fallen off the bus."
    (told,) = told_events(line)
    assert (told.kind, told.hostname, told.details["xid"]) == ("driver_xid", "ailcm-ai1", 79)
    assert without_label(LogLine(line, "kern.log", 1))[1].text == line  # the prefix is cut with its stamp, later


def test_a_shell_prompt_names_the_host_of_the_output_after_it():
    """``root@node4:~# dmesg -T | grep NVRM`` (an Akash provider's node, round 41's train excerpt), then the XID."""
    xid = "[Fri Aug  9 13:32:56 2024] NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1)."
    (told,) = told_events("root@node4:~# dmesg -T |grep NVRM", xid)
    assert (told.kind, told.hostname) == ("driver_xid", "node4")
    assert prompt_host("(base) user@gpu-node-3:~/work$ python train.py") == "gpu-node-3"
    assert prompt_host("user@hostname:~$ nvidia-smi") is None  # a poster's placeholder
    assert prompt_host("email me at a@b.com: thanks") is None
    (bare,) = told_events(xid)
    assert bare.hostname is None


def told_events(*lines: str) -> list[LogEvent]:
    reader = LogReader()
    told = [o for n, text in enumerate(lines, 1) for o in reader.feed(LogLine(text, "paste.log", n))]
    return [o for o in told + reader.flush() if isinstance(o, LogEvent)]


def test_open_mpi_s_tag_names_the_line_s_host_and_rank():
    """SageMaker's distributed jobs run under ``mpirun --tag-output``: ``[1,mpirank:14,algo-2]<stdout>:`` (the corpus's
    train split): rank 14 on host algo-2, where the file names no node."""
    reader = LogReader()
    line = "[1,mpirank:14,algo-2]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 6; 15.78 GiB total capacity; 14.05 GiB already allocated; 55.75 MiB free; 14.10 GiB reserved in total by PyTorch)"
    (told,) = [e for e in reader.feed(LogLine(line, "job.log", 1)) if isinstance(e, LogEvent)]
    assert (told.rank, told.hostname, told.gpu_index) == (14, "algo-2", 6)
    named = LogLine("[1,mpirank:3,algo-1]<stdout>:step 1 loss 2.0", "job.log", 1, node="node-7")
    assert without_label(named)[1].node == "node-7"  # a node the source names stays the line's
    assert without_label(named)[1].text == named.text  # the tag stays for the rank prefix's reading
