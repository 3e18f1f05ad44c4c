"""Words of round 14's ``train`` excerpts no form read before: a DCGM diagnostic's table, the CUDA driver API's
error names, torch_xla's rendezvous, ``clip_grad_norm_``'s warning, spawn's process index, a bare ``Exception``;
c10d's warning of one failed try to reach its store, which is no failure; the watchdog's trailer after its wrapped
line; round 15's: the CUDA driver's out of memory, NCCL with no NET plugin, a logger's error naming a fatal signal."""

from __future__ import annotations

import math

import pytest

from tests.logs.excerpts import TRAIN, line_of, read_excerpt
from trainpulse_otel.logs import LogLine, LogReader
from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.logs.fatal import death
from trainpulse_otel.logs.statements import statement
from trainpulse_otel.logs.tracebacks import exception_details
from trainpulse_otel.samples import CUDA_OOM, GPU_FAULT, PROCESS_FAILED, TRANSPORT_ERROR, WATCHDOG_TIMEOUT, LogEvent

ONE_LINERS = [
    (
        "torchtitan_out_of_memory_b200-flex-attn-bwd-triton-launch-cuda-driver-error-oom.log",
        "RuntimeError: CUDA driver error: out of memory",
        CUDA_OOM,
        {},
    ),
    (
        "torchtitan_network_error_b200-nccl-ib-disable-failed-to-initialize-any-net-plugin.log",
        "NCCL WARN Failed to initialize any NET plugin",
        TRANSPORT_ERROR,
        {},
    ),
    (
        "dcgm_gpu_hardware_fault_dcgmi-diag-r2-gpu-memory-fail-gpu0-thermal.log",
        "Fail - GPU",
        GPU_FAULT,
        {"gpu_index": 0},
    ),
    (
        "dcgm_gpu_hardware_fault_dcgmi-diag-deployment-gpu3-uncorrectable-row-remap-pending.log",
        "uncorrectable memory errors",
        GPU_FAULT,
        {"gpu_index": 3},
    ),
    (
        "tf-object-detection_rank_crashed_legacy-train-windows-launch-failed-event-status-abort.log",
        "CUDA_ERROR_LAUNCH_FAILED",
        PROCESS_FAILED,
        {"cuda_error": "CUDA_ERROR_LAUNCH_FAILED"},
    ),
    (
        "torch-xla_network_error_kaggle-tpu-mesh-rendezvous-loss-reduce-socket-closed.log",
        "Failed to meet rendezvous",
        TRANSPORT_ERROR,
        {},
    ),
]


@pytest.mark.parametrize(("name", "words", "kind", "details"), ONE_LINERS, ids=[w for _, w, _, _ in ONE_LINERS])
def test_a_diagnostic_or_a_runtime_s_own_name_for_the_failure_is_read(name, words, kind, details):
    (failure,) = FailureScanner().feed(line_of(name, words)) or [None]
    assert failure is not None and failure.kind == kind
    assert {k: failure.details.get(k) for k in details} == details


def test_a_dcgm_table_s_passing_row_and_a_driver_s_harmless_code_are_no_fault():
    assert not FailureScanner().feed("| GPU Memory                | Pass - GPUs: 1, 2, 3, 4, 5, 6, 7               |")
    assert not FailureScanner().feed(
        "E tensorflow/stream_executor/cuda/cuda_driver.cc:300] failed call to cuInit: CUDA_ERROR_NO_DEVICE"
    )


def test_spawn_s_process_index_is_the_rank_a_bare_exception_names():
    assert exception_details("Exception: process 3 terminated with signal SIGKILL") is not None
    told = [
        e
        for e in read_excerpt("pytorch_rank_crashed_hybrik-mp-spawn-epoch0-process3-sigkill.log")
        if isinstance(e, LogEvent)
    ]
    assert [(e.kind, e.rank) for e in told] == [(PROCESS_FAILED, 3)]


def test_clip_grad_norm_s_warning_is_a_non_finite_gradient_norm():
    name = "espnet_nonfinite_loss_espnet2-librispeech-clip-grad-norm-nonfinite-futurewarning.log"
    said = statement(line_of(name, "Non-finite norm encountered"))
    assert said is not None and math.isnan(said["grad_norm"])


def test_a_warning_of_one_failed_try_to_reach_the_store_is_no_failure_and_giving_up_is():
    healthy = read_excerpt("pytorch_healthy_mp-spawn-c10d-network-unreachable-then-gpu-epoch-steps.log")
    assert not [e for e in healthy if isinstance(e, LogEvent)]
    failed = [
        e for e in read_excerpt("hybrik_network_error_init-tcp-client-socket-errno110.log") if isinstance(e, LogEvent)
    ]
    assert failed and failed[0].kind == TRANSPORT_ERROR


def test_the_watchdog_s_own_trailer_after_a_wrapped_line_is_its_timeout_not_a_crash():
    """A terminal 200 columns wide cut the watchdog's line: its end and the C++ trailer after it carry no
    ``[rank1]:`` prefix, so another stream reads them; ``raised from checkTimeout`` is the watchdog's exception."""
    name = "accelerate_collective_timeout_h100-ddp-allreduce-456-pg0-default.log"
    reader = LogReader()
    wrapped = [
        text[i : i + 200] for text in (TRAIN / name).read_text().splitlines() for i in range(0, len(text) or 1, 200)
    ]
    told = [o for n, text in enumerate(wrapped, 1) for o in reader.feed(LogLine(text, "excerpt.log", n))]
    kinds = [e.kind for e in told + reader.flush() if isinstance(e, LogEvent)]
    assert kinds and set(kinds) == {WATCHDOG_TIMEOUT}


def test_a_logger_s_error_that_names_a_fatal_signal_is_the_process_s_death():
    """Marian's ``[2019-02-26 00:12:43] Error: Segmentation fault``, then its call stack and a localized shell's word."""
    told = [
        e
        for e in read_excerpt("marian_rank_crashed_v1.7.8-multi-transformer-startup-segfault-czech-sigabrt.log")
        if isinstance(e, LogEvent)
    ]
    assert told and told[0].kind == PROCESS_FAILED and "Segmentation fault" in told[0].details["error"]


@pytest.mark.parametrize(
    "line",
    [
        "Step at 4 with Perplexity: nan",  # a fine-tune's evaluation (DeepSpeed's random-LTD example, round 43)
        (  # a PPO policy's outputs gone NaN (a ManiSkill run, round 43): only NaN fails Real()
            "ValueError: Expected parameter loc (Tensor of shape (3200, 7)) of distribution Normal(loc: torch.Size([3200, "
            "7]), scale: torch.Size([3200, 7])) to satisfy the constraint Real(), but found invalid values:"
        ),
        "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",  # sampling NaN logits
    ],
)
def test_a_model_s_numbers_gone_nan_said_in_a_sentence_or_an_exception_are_a_nan_loss(line):
    said = statement(line)
    assert said is not None and math.isnan(said["loss"])


def test_a_perplexity_overflowing_and_pytorch_1_s_startup_thc_warning_are_no_failure():
    """exp(loss) overflows float32 past a loss of ~88: an infinite perplexity is a finite loss. PyTorch 1.0 printed
    ``THCudaCheck FAIL file=…/THCGeneral.cpp line=663 error=11 : invalid argument`` at startup on newer GPUs, then
    trained (pytorch/pytorch#15797); a kernel's fault by its code is a crash."""
    assert statement("| epoch 001 | valid on 'valid' subset | loss 91.2 | ppl inf") is None
    startup = "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=663 error=11 : invalid argument"
    assert FailureScanner().feed(startup) is None
    assert FailureScanner().feed(startup.replace("error=11 : invalid argument", "error=59 : device-side assert"))


def test_a_shell_in_another_language_names_the_signal_it_reports():
    line = "train.sh: řádek 27: 18322 Neúspěšně ukončen (SIGABRT)        (core dumped [obraz paměti uložen]) marian"
    assert death(line)["signal"] == "SIGABRT"
    assert death("Running the (SIGTERM) handler test") is None  # no core dumped: no report
