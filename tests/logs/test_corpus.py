"""The labelled corpus of real logs, and ``trainpulse eval -logs`` on it.

The corpus is data the reader is judged on (tests/fixtures/logs/corpus/README.md): every excerpt listed, cited,
labelled with a known class, and on the side of the split its source's hash puts it. The scoring is checked on
small corpora made here from its ``train`` files; the figures of both splits are in docs/evaluation.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainpulse_otel.config import Settings
from trainpulse_otel.evaluation.log_corpus import (
    HEALTHY,
    CorpusError,
    evaluate_logs,
    index_items,
    load_index,
    run_case,
)
from trainpulse_otel.runtime import discover

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"
TRAINPULSE = [sys.executable, "-m", "trainpulse_otel"]
MAX_EXCERPT = 64 * 1024


def split_of(source: str) -> str:
    return "test" if int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) % 3 == 0 else "train"


def test_every_excerpt_is_listed_cited_labelled_and_on_its_source_s_side_of_the_split():
    entries = load_index(CORPUS)
    signals = set(discover().vocabulary.signal_names) | {HEALTHY}
    index = index_items(CORPUS)
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*.log")}
    assert on_disk == {e.file for e in entries}
    for entry, raw in zip(entries, index, strict=True):
        assert entry.label in signals, entry.file
        assert raw["source"] and raw["note"] and raw["framework"], entry.file
        assert entry.split == split_of(raw["source"]) and entry.file.startswith(entry.split + "/"), entry.file
        assert (CORPUS / entry.file).stat().st_size <= MAX_EXCERPT, entry.file
    contents = [hashlib.sha256((CORPUS / e.file).read_bytes()).hexdigest() for e in entries]
    assert len(set(contents)) == len(contents)


def test_the_corpus_is_large_and_covers_every_class_of_the_contract():
    entries = load_index(CORPUS)
    labels = [e.label for e in entries]
    assert len(entries) >= 300 and labels.count(HEALTHY) >= 60
    assert {
        "collective_timeout",
        "network_error",
        "out_of_memory",
        "rank_crashed",
        "gpu_hardware_fault",
        "nonfinite_loss",
        "loss_spike",
        "training_stalled",
    } <= set(labels)
    frameworks = {item["framework"] for item in index_items(CORPUS)}
    assert len(frameworks) >= 15


def small_corpus(tmp_path: Path, names: dict[str, str]) -> Path:
    """A corpus of train excerpts, ``names``: file → class, all in one split named ``train``."""
    files = []
    for name, label in names.items():
        (tmp_path / name).write_bytes((CORPUS / "train" / name).read_bytes())
        files.append({"file": name, "class": label, "split": "train"})
    (tmp_path / "index.json").write_text(json.dumps({"version": 1, "files": files}))
    return tmp_path


def test_scoring_gives_each_class_its_figures_and_counts_false_alarms_on_healthy_logs(tmp_path):
    root = small_corpus(
        tmp_path,
        {
            "maxtext_healthy_tpu-v3-completed-step.log": HEALTHY,
            "tensor2tensor_rank_crashed_estimator-loss-step-then-segfault.log": "rank_crashed",
            "tensorflow_nonfinite_loss_tf-estimator-model-diverged.log": "nonfinite_loss",
            # labelled wrong on purpose: a healthy log the scorer must count as given healthy, not as the label
            "pith-train_healthy_zero-padded-step-pipes.log": "loss_spike",
        },
    )
    (report,) = evaluate_logs(root)
    assert report.classes["rank_crashed"].f1 == 1.0 and report.classes["nonfinite_loss"].recall == 1.0
    assert report.classes["loss_spike"].recall == 0.0 and report.classes[HEALTHY].precision == 0.5
    assert report.right_signal == (2, 3) and report.healthy_parsed == (1, 1) and report.healthy_critical == []
    assert 0 < report.macro_f1 < 1 and report.failures  # the bar is missed, and said


def test_a_corpus_index_that_cannot_be_scored_is_one_line_naming_what_is_wrong(tmp_path):
    with pytest.raises(CorpusError, match="cannot read"):
        evaluate_logs(tmp_path)
    (tmp_path / "index.json").write_text(json.dumps({"files": [{"file": "nope.log", "class": HEALTHY}]}))
    with pytest.raises(CorpusError, match=r"no file nope\.log"):
        evaluate_logs(tmp_path)
    root = small_corpus(tmp_path, {"maxtext_healthy_tpu-v3-completed-step.log": "not_a_signal"})
    with pytest.raises(CorpusError, match="'not_a_signal' is no signal"):
        evaluate_logs(root)


def eval_cli(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    return subprocess.run([*TRAINPULSE, "eval", *argv], capture_output=True, text=True, env=env, timeout=300)


def test_eval_logs_prints_each_split_and_exits_by_the_figures(tmp_path):
    root = small_corpus(
        tmp_path,
        {
            "maxtext_healthy_tpu-v3-completed-step.log": HEALTHY,
            "tensor2tensor_rank_crashed_estimator-loss-step-then-segfault.log": "rank_crashed",
        },
    )
    done = eval_cli("-logs", str(root), "-json")
    assert done.returncode == 0, done.stderr
    (split,) = json.loads(done.stdout)["splits"]
    assert split["split"] == "train" and split["macro_f1"] == 1.0 and split["passed"] is True
    assert {c["file"]: c["given"] for c in split["cases"]} == {
        "maxtext_healthy_tpu-v3-completed-step.log": HEALTHY,
        "tensor2tensor_rank_crashed_estimator-loss-step-then-segfault.log": "rank_crashed",
    }
    text = eval_cli("-logs", str(root))
    assert text.returncode == 0 and "macro-F1 1.000" in text.stdout and "PASS" in text.stdout


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("-logs", "/nonexistent/corpus"), "cannot read /nonexistent/corpus/index.json"),
        (("-logs", str(CORPUS), "-split", "dev"), "no split dev"),
        (("-split", "train"), "-split goes with -logs DIR"),
    ],
)
def test_eval_logs_usage_errors_are_one_line_and_exit_2(argv, said):
    done = eval_cli(*argv)
    assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_train_split_keeps_the_figures_the_reader_reached_on_it():
    """A guard against regressions on the split the reader was tuned on, a little below the figures it reached
    (docs/evaluation.md); the test split is reported there, never asserted here: it must stay unread."""
    (train,) = evaluate_logs(CORPUS, ["train"])
    assert train.macro_f1 >= 0.93
    for got, of in (train.right_signal, train.subject_named):
        assert got / of >= 0.90
    assert train.right_signal[0] / train.right_signal[1] >= 0.95
    assert train.healthy_critical == []
    assert train.healthy_parsed[0] / train.healthy_parsed[1] >= 0.85


@pytest.mark.parametrize(
    ("name", "given"),
    [
        # Ray's actor died (no rank named), then a survivor's TCPStore ``Connection reset by peer``: the crash
        (
            "verl_rank_crashed_grpo-init-model-workerdict-exits-connection-error-code-2-tcpstore-reset.log",
            "rank_crashed",
        ),
        # dynamo's fallback printed a compiler's traceback as glog warnings (``[rank0]:W0618 …``), then 10 iterations
        ("nemo2_healthy_evo2-dynamo-inductor-warning-traceback-then-10-iterations.log", HEALTHY),
        # an OOM on task 0, then ``srun: error: gra1177: task 1: Killed``: srun ending the step's other tasks
        ("lightning_out_of_memory_graham-nnunet-t4-two-node-srun-terminated.log", "out_of_memory"),
    ],
)
def test_the_class_given_is_the_first_failure_the_lines_show(name, given):
    entry = next(e for e in load_index(CORPUS) if e.file == f"train/{name}")
    classes = frozenset(e.label for e in load_index(CORPUS)) - {HEALTHY}
    case = run_case(CORPUS, entry, classes, Settings(), discover())
    assert case.given == given and (given != HEALTHY or case.reports > 0), (case.given, case.raised)


def test_an_index_may_name_its_parts_and_a_bad_part_is_named(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "crash.log").write_text("Traceback (most recent call last):\nValueError: bad\n")
    entry = {"file": "train/crash.log", "class": "rank_crashed", "split": "train", "source": "o/r#1"}
    (tmp_path / "index-train.json").write_text(json.dumps({"version": 1, "files": [entry]}))
    (tmp_path / "index.json").write_text(json.dumps({"version": 1, "parts": ["index-train.json"]}))
    assert [e.file for e in load_index(tmp_path)] == ["train/crash.log"] and index_items(tmp_path) == [entry]
    for parts, words in ((["../x.json"], "a part is a file name beside it"), (["missing.json"], "cannot read")):
        (tmp_path / "index.json").write_text(json.dumps({"version": 1, "parts": parts}))
        with pytest.raises(CorpusError, match=words):
            load_index(tmp_path)
