"""A process's death, a GPU failing and a collective stalling, in the words real logs use beyond the classic forms.

The lines are the labelled corpus's ``train`` split (tests/fixtures/logs/corpus/index.json cites each file) and,
where named, public documentation quoted in ``DOCUMENTED``; each is read by :class:`FailureScanner` and
:class:`LogReader` as a replay reads it.
"""

from __future__ import annotations

import pytest

from tests.logs.excerpts import TRAIN, line_of, read_excerpt, told_alone
from trainpulse_otel.logs import LogLine, LogReader, fatal, gpu_faults, split_prefixes, stores
from trainpulse_otel.logs import collectives as c
from trainpulse_otel.logs.failures import FailureScanner
from trainpulse_otel.samples import (
    CUDA_OOM,
    GPU_FAULT,
    JOB_CANCELLED,
    PROCESS_FAILED,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
    LogEvent,
)

#: Lines public documentation quotes: PyTorch's distributed debugging docs (``monitored_barrier``), and a
#: cluster-operations write-up's torchrun error file (the search tool's code index, ids 49343896 and 10679892842).
DOCUMENTED = {
    "monitored_barrier": "RuntimeError: Rank 1 failed to pass monitoredBarrier in 2000 ms",
    "nvlink": "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
}


def events(name: str) -> list[LogEvent]:
    return [e for e in read_excerpt(name) if isinstance(e, LogEvent)]


def assert_first_told(kinds: dict[str, str]) -> None:
    """Each excerpt's first event is of its kind."""
    for name, kind in kinds.items():
        told = events(name)
        assert told and told[0].kind == kind, (name, [e.kind for e in told])


# (corpus file, the words of the line, the event kind it tells, details it gives)
ONE_LINERS = [
    (
        "axolotl_gpu_hardware_fault_mi300x-axolotl-hw-exception-gpu-hang-node9.log",
        "reason :GPU Hang",
        GPU_FAULT,
        {"fault": "the GPU raised a hardware exception (ROCm's runtime: HW Exception by GPU)"},
    ),
    (
        "amdgpu-driver_gpu_hardware_fault_mi300x-dmesg-athub-uncorrectable-aca-hardware-error.log",
        "uncorrectable hardware error",
        GPU_FAULT,
        {"fault": "uncorrectable hardware error (amdgpu)", "pci": "0000:dd:00"},
    ),
    (
        "ultralytics_rank_crashed_yolov10-m3-mps-val-gathernd-failed-assertion.log",
        "failed assertion",
        PROCESS_FAILED,
        {"signal": "SIGABRT"},
    ),
    (
        "comfyui_rank_crashed_admotiondirector-m2-lora-step0-mpsndarray-slice-assertion-abort-trap.log",
        "Abort trap: 6",
        PROCESS_FAILED,
        {"signal": "SIGABRT"},
    ),
    (
        "tensor2tensor_rank_crashed_estimator-loss-step-then-segfault.log",
        "Segmentation fault",
        PROCESS_FAILED,
        {"signal": "SIGSEGV"},
    ),
    ("megatron_rank_crashed_nccl-init-sigbus.log", "Caught signal 7", PROCESS_FAILED, {"signal": "SIGBUS"}),
    (
        "deepspeed_rank_crashed_after-checkpoint-return-code-1.log",
        "exits with return code",
        PROCESS_FAILED,
        {"exit_code": 1, "launcher": "deepspeed", "local_rank": 4},
    ),
    (
        "dolly_rank_crashed_metaflow-prefixed-enospc-save.log",
        "No space left on device",
        PROCESS_FAILED,
        {"storage": True},
    ),
    ("pytorch_rank_crashed_torch-save-write-io-error.log", "Input/output error", PROCESS_FAILED, {"storage": True}),
    ("nvidia-driver_gpu_hardware_fault_rminitadapter-failed-loop.log", "RmInitAdapter failed", GPU_FAULT, {}),
    ("returnn_gpu_hardware_fault_nvsmi-unknown-error-aer.log", "Unable to determine the device handle", GPU_FAULT, {}),
    (
        "kohya-sd-scripts_gpu_hardware_fault_sdxl-ecc-rank1-watchdog.log",
        "uncorrectable ECC error",
        GPU_FAULT,
        {"fault": "uncorrectable ECC error"},
    ),
    (
        "caffe2_rank_crashed_detectron-check-failed-launch-failure.log",
        "Check failed: error == cudaSuccess",
        PROCESS_FAILED,
        {"cuda_error": "unspecified launch failure"},
    ),
    (
        "cntk_rank_crashed_cublas-execution-failed-gpu1.log",
        "CUBLAS failure 13",
        PROCESS_FAILED,
        {"gpu_index": 1, "host": "rg404.bbn.com"},
    ),
    (
        "coqui-stt_rank_crashed_slurm-job-memory-limit.log",
        "exceeded memory limit",
        PROCESS_FAILED,
        {"signal": "SIGKILL"},
    ),
    (
        "mmf_rank_crashed_butd-shm-bus-error.log",
        "Unexpected bus error",
        PROCESS_FAILED,
        {"signal": "SIGBUS", "data_loader": True},
    ),
    (
        "torchrun_network_error_elastic-c10d-store-connect-timed-out.log",
        "connect() timed out",
        TRANSPORT_ERROR,
        {"transport": "TCPStore", "error": "connect timed out"},
    ),
    (
        "torchrun_network_error_rdzv-c10d-client-socket-timed-out-60s.log",
        "client socket has timed out",
        TRANSPORT_ERROR,
        {"transport": "TCPStore", "peer": "192.0.0.1:1234"},
    ),
    (
        "torchrun_network_error_elastic-rdzv-c10d-store-connection-multi-nic.log",
        "RendezvousConnectionError",
        TRANSPORT_ERROR,
        {"transport": "TCPStore", "error": "store connection failed"},
    ),
    (
        "aws-ofi-nccl_network_error_efa-ubuntu1804-couldnt-open-av.log",
        "Couldn't open AV",
        TRANSPORT_ERROR,
        {"transport": "OFI"},
    ),
    (
        "horovod_network_error_2019-mxnet-ucx-roce-retry-exceeded.log",
        "Transport retry count exceeded",
        TRANSPORT_ERROR,
        {"transport": "RoCE", "status": "IBV_WC_RETRY_EXC_ERR", "device": "mlx5_0:1/RoCE"},
    ),
    (
        "paddle_out_of_memory_deepspeech2-mul-badalloc-gpu0.log",
        "Out of memory error on GPU 0",
        CUDA_OOM,
        {},
    ),
    (
        "horovod_rank_crashed_mpirun-keras-rank7-signal9-no-error.log",
        "mpirun noticed that process rank 7",
        PROCESS_FAILED,
        {"signal": "SIGKILL"},
    ),
    (
        "vllm-ascend_network_error_npu-grpo-weight-sync-hccl-ei0009-transport-init.log",
        "Transport init error",
        TRANSPORT_ERROR,
        {"transport": "HCCL", "code": "EI0009"},
    ),
    (
        "deepspeed_rank_crashed_bus-error-ncclgroupend-after-11h.log",
        "Caught signal 7",
        PROCESS_FAILED,
        {"signal": "SIGBUS", "host": "experiment-3fce9b69-1446-worker-0"},
    ),
    (
        "horovod_rank_crashed_docker-mnist-four-ranks-bus-error-open-mpi-handler.log",
        "Signal: Bus error (7)",
        PROCESS_FAILED,
        {"signal": "SIGBUS", "error": "Bus error"},
    ),
    (
        "horovod_rank_crashed_mpi-allreduce-munmap-chunk-invalid-pointer-rank2.log",
        "munmap_chunk(): invalid pointer",
        PROCESS_FAILED,
        {"signal": "SIGABRT", "error": "munmap_chunk(): invalid pointer"},
    ),
    (
        "openrlhf_rank_crashed_ppo-ray-critic-actor-died-system-error.log",
        "ray.exceptions.ActorDiedError",
        PROCESS_FAILED,
        {"error": "ActorDiedError: The actor died unexpectedly before finishing this task."},
    ),
    (
        "horovod_rank_crashed_elastic-gloo-worker-exit-code-137.log",
        "Process name:",
        PROCESS_FAILED,
        {"host": "elastic-test-worker-1", "local_rank": 0},
    ),
    (
        "mmengine_rank_crashed_frnet-launch-py37-local-rank1-died-sigkill.log",
        "died with <Signals.SIGKILL",
        PROCESS_FAILED,
        {"local_rank": 1, "signal": "SIGKILL"},
    ),
    (
        "dlprim_rank_crashed_opencl-gfx1100-memory-access-fault-zsh-iot.log",
        "Memory access fault by GPU",
        PROCESS_FAILED,
        {"cuda_error": "memory access fault"},
    ),
    (
        "dlprim_rank_crashed_opencl-gfx1100-memory-access-fault-zsh-iot.log",
        "IOT instruction",
        PROCESS_FAILED,
        {"signal": "SIGABRT"},
    ),
    (
        "pytorch-xla_rank_crashed_tpu-v5e-litepod16-core-halted-step1.log",
        "Core halted unexpectedly",
        PROCESS_FAILED,
        {"signal": "SIGABRT"},
    ),
    (
        "easyr1_rank_crashed_raylet-oom-killed-worker-during-compute-log-probs.log",
        "killed due to memory pressure (OOM)",
        PROCESS_FAILED,
        {"signal": "SIGKILL", "host": "10.95.143.76"},
    ),
    (  # PyTorch 1.x's THC check, its words cut by the tool: the code says it (77, an illegal address)
        "espnet_rank-crashed_transducer-illegal-memory-access.log",
        "THCudaCheck FAIL",
        PROCESS_FAILED,
        {"cuda_error": "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCReduceAll.cuh line=327 error=77"},
    ),
    (  # the shell's word glued after a bar the terminal never ended (MLX's mobilenet, round 42)
        "mlx_rank_crashed_mobilenet-train-segfault.log",
        "9it [00:04,  2.30it/s]zsh: segmentation fault",
        PROCESS_FAILED,
        {"signal": "SIGSEGV"},
    ),
    ("pytorch_rank_crashed_simsg-host-oom-killed.log", "13.82it/s]Killed", PROCESS_FAILED, {"signal": "SIGKILL"}),
    (
        "deepspeed_out_of_memory_chat-step1-lora-backward-cublas-alloc-failed.log",
        "CUBLAS_STATUS_ALLOC_FAILED",
        CUDA_OOM,
        {},
    ),
    (
        "jax_out_of_memory_ttt-remat-failed-allocate-request-device-ordinal-5.log",
        "RESOURCE_EXHAUSTED: Failed to allocate",
        CUDA_OOM,
        {},
    ),
    (
        "pytorch_out_of_memory_gaudi-dl1-backward-synhelper-workspace-allocation-failed.log",
        "MODULE:SYNHELPER workspace Allocation",
        CUDA_OOM,
        {},
    ),
]


@pytest.mark.parametrize(("name", "words", "kind", "details"), ONE_LINERS, ids=[w for _, w, _, _ in ONE_LINERS])
def test_a_death_or_a_failing_gpu_is_told_by_its_own_line(name, words, kind, details):
    told = FailureScanner().feed(line_of(name, words))
    assert told, words
    (failure,) = told
    assert failure.kind == kind and {k: failure.details.get(k) for k in details} == details


def test_documented_forms_of_a_barrier_timeout_and_an_nvlink_failure():
    (barrier,) = FailureScanner().feed(DOCUMENTED["monitored_barrier"])
    assert barrier.kind == WATCHDOG_TIMEOUT and barrier.details["missing_ranks"] == [1]
    assert barrier.details["timeout_ms"] == 2000
    (nvlink,) = FailureScanner().feed(DOCUMENTED["nvlink"])
    assert nvlink.kind == GPU_FAULT and nvlink.details["fault"] == "uncorrectable NVLink error"


def test_corrected_pcie_errors_are_no_fault_and_uncorrected_ones_are():
    assert gpu_faults.gpu_fault("pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0") is None
    fatal_aer = gpu_faults.gpu_fault("pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received: 0000:3b:00.0")
    assert fatal_aer is not None and fatal_aer["pci"] == "0000:00:01"


def test_a_sentence_that_starts_with_a_signal_s_word_is_no_death():
    for line in ("Killed processes are restarted by the agent", "Bus error handling is described in the docs"):
        assert fatal.fatal_signal(line) is None, line
    for line in ("free(): see the allocator notes below for details.", "Signal: received from the agent"):
        assert fatal.death(line) is None, line
    assert fatal.death("double free or corruption (out)") == {
        "signal": "SIGABRT",
        "error": "double free or corruption (out)",
    }
    assert fatal.fatal_signal("Killed") == {"signal": "SIGKILL", "error": "Killed"}


def test_other_frameworks_out_of_memory_wordings_are_out_of_memory_with_their_gpu():
    told = {e.kind for e in events("tensorflow_out_of_memory_tf-bert-oom-gpu0-bfc.log")}
    assert CUDA_OOM in told
    (oom,) = [e for e in events("pytorch_out_of_memory_thcudacheck-oom-dataloader-del.log") if e.kind == CUDA_OOM][:1]
    assert oom.details["error"]
    # the kernel's OOM killer is the host's memory, not an allocation of the job's: a crash
    assert (
        c is not None and FailureScanner().feed("Out of memory: Killed process 4242 (python)")[0].kind == PROCESS_FAILED
    )


def test_a_crash_the_launcher_names_by_local_rank_and_its_store_losing_a_peer():
    store = stores.failure(
        "The client socket has failed to connect to [node-1]:29500 (errno: 111 - Connection refused)."
    )
    assert store == {
        "transport": "TCPStore",
        "error": "Connection refused",
        "peer": "[node-1]:29500",
    }
    (failure,) = FailureScanner().feed(
        "The client socket has failed to connect to [node-1]:29500 (errno: 111 - Connection refused)."
    )
    assert failure.kind == TRANSPORT_ERROR


def test_a_c10_error_s_message_before_its_trailer_is_the_crash():
    told = events("ms-swift_rank_crashed_swift-grpo-ascend-atb-setup-failed.log")
    (crash,) = [e for e in told if e.kind == PROCESS_FAILED]
    assert crash.details["exception"] == "c10::Error" and crash.details["error"] == "setup failed!"
    assert crash.rank == 0  # the trailer, printed without the prefix, is read with the rank's line


def test_a_traceback_the_excerpt_ends_within_is_a_crash_unless_it_is_the_launcher_s():
    # cuBLAS's legacy ``!!!! kernel execution error.`` lines are the crash, the traceback cut after them its own
    cut = [
        e for e in events("deepspeed_rank_crashed_transformer-kernel-execution-error.log") if e.kind == PROCESS_FAILED
    ]
    assert [e.details.get("cut") for e in cut] == [None, True]
    assert cut[0].details["cuda_error"] == "kernel execution error"
    scanner = FailureScanner()
    for text in (
        "Traceback (most recent call last):",
        '  File "/usr/bin/torchrun", line 8, in <module>',
        '  File "/x/torch/distributed/run.py", line 879, in main',
    ):
        scanner.feed(text)
    assert scanner.flush() == []


def test_a_rank_prefix_glued_after_a_bar_or_a_ray_actor_s_label_names_the_rank():
    (crash,) = [
        e for e in events("ms-swift_rank_crashed_grpo-illegal-instruction-rank2.log") if e.kind == PROCESS_FAILED
    ]
    assert crash.rank == 2  # ``… 10.54s/it][rank2]:[E225 …``
    (timeout,) = events("verl_collective_timeout_ray-workerdict-stamped-mesh-tp-broadcast.log")
    assert timeout.kind == WATCHDOG_TIMEOUT and timeout.rank == 15  # the global rank, not the mesh group's ``[Rank 1]``


def test_the_host_a_failure_line_names_is_in_its_evidence():
    (failure,) = [e for e in events("cntk_rank_crashed_cublas-execution-failed-gpu1.log") if e.kind == PROCESS_FAILED]
    assert (failure.details["host"], failure.gpu_index) == ("rg404.bbn.com", 1)
    (link,) = [e for e in events("xgboost_network_error_gpu-hist-roce-ibv-create-cq.log") if e.kind == TRANSPORT_ERROR]
    assert link.details["host"] == "spark01"  # NCCL's ``spark01:2683:2826 [0]`` prefix
    reader = LogReader()
    told = reader.feed(LogLine("srun: error: node17: task 3: Killed", "launcher.log", 1)) + reader.flush()
    (event,) = [e for e in told if isinstance(e, LogEvent)]
    assert (event.details["host"], event.rank, event.details["signal"]) == ("node17", 3, "SIGKILL")


def test_round_three_wordings_name_their_gpu_and_survive_a_terminal_s_wrap():
    """ROCm's ``HIP out of memory … GPU 0 has a total capacity``; Paddle's ``Out of memory error on GPU 0``; an
    MXNet ``cudaMalloc fail`` / ``ed: out of memory`` the paste wrapped mid-word; an old ``[Rank 1] Caught
    collective operation timeout: WorkNCCL(…, Tim`` wrapped inside its fields."""
    (hip,) = [
        e for e in events("autotrain_out_of_memory_rocm-hip-out-of-memory-trainer-wrapper.log") if e.kind == CUDA_OOM
    ][:1]
    assert hip.gpu_index == 0
    paddle = [e for e in events("paddle_out_of_memory_deepspeech2-mul-badalloc-gpu0.log") if e.kind == CUDA_OOM]
    assert 0 in {e.gpu_index for e in paddle}
    assert CUDA_OOM in {e.kind for e in events("mxnet_out_of_memory_maskrcnn-cudamalloc-failed-after-batch-2260.log")}
    timeouts = [
        e
        for e in events("ultralytics_collective_timeout_caught-allreduce-3h-dataset-cache.log")
        if e.kind == WATCHDOG_TIMEOUT
    ]
    assert timeouts and timeouts[0].details["op"] == "ALLREDUCE" and timeouts[0].details["seq"] == 6


def test_an_npu_out_of_memory_names_its_device_and_mpirun_names_the_rank_it_saw_die():
    (oom,) = [
        e for e in events("llamafactory_out_of_memory_ascend-910b-npu2-oom-loading-shards.log") if e.kind == CUDA_OOM
    ][:1]
    assert oom.gpu_index == 2  # ``NPU out of memory. Tried to allocate 386.00 MiB (NPU 2; 60.97 GiB total …``
    (death,) = FailureScanner().feed(
        line_of("horovod_rank_crashed_mpirun-keras-rank7-signal9-no-error.log", "mpirun noticed")
    )
    assert death.rank == 7 and "host" not in death.details  # the poster's ``HOSTNAME`` placeholder is no host


def test_a_device_side_hccl_timeout_and_the_crash_it_raised_inside_a_collective():
    """Ascend's ``EI9999 … hccl fftsplus task timeout occurred during task execution … timeout:30min(default)``
    is the collective's timeout; the ``RuntimeError`` raised inside ``broadcast_object_list`` (its innermost frame in
    ``distributed_c10d.py``) died of that collective, as a consequence does."""
    told = events("lmdeploy_collective_timeout_ascend-hccl-fftsplus-task-timeout-broadcast.log")
    assert WATCHDOG_TIMEOUT in {e.kind for e in told}
    (crash,) = [e for e in told if e.kind == PROCESS_FAILED]
    assert crash.details["collective"] is True and crash.details["exception"] == "RuntimeError"


def test_round_six_wordings_an_mpiexec_death_other_cuda_wrappers_oom_and_nccl_s_system_error():
    """OpenMPI reports a death in its launcher's name (``mpiexec noticed …``); darknet's and CNTK's CUDA wrappers
    word an OOM their way (CNTK naming the GPU); NCCL's ``unhandled system error`` / ``ncclSystemError`` is the
    network's (the corpus's train split)."""
    (death,) = FailureScanner().feed(line_of("horovod_rank_crashed_glow-mpiexec-segfault-rank0.log", "mpiexec noticed"))
    assert death.rank == 0 and death.details["signal"] == "SIGSEGV" and death.details["host"] == "lhx-910"
    (darknet,) = FailureScanner().feed(line_of("darknet_out_of_memory_yolov3-resize-cuda-oom-assert.log", "CUDA Error"))
    assert darknet.kind == CUDA_OOM
    (cntk,) = FailureScanner().feed(
        line_of("cntk_out_of_memory_fasterrcnn-eval-model-cudamalloc.log", "CUDA failure 2")
    )
    assert cntk.kind == CUDA_OOM and cntk.gpu_index == 0
    told = list(events("accelerate_network_error_two-node-ncclsystemerror-peer-closure-hint.log"))
    assert [e.details.get("error") for e in told if e.kind == TRANSPORT_ERROR] == ["ncclSystemError"]


def test_a_warn_whose_words_are_on_its_next_lines_and_nccl_s_topology_failing_across_nodes():
    """aws-ofi-nccl prints ``… ofi_process_cq:196 NCCL WARN`` and its words (``NET/OFI Request 0x… completed with
    error.``) on the next line; NCCL's ``ring 2 does not loop back to start`` is its topology failing, the host
    named by NCCL's prefix behind pdsh's label (the corpus's train split)."""
    told = events("trl_network_error_slingshot-cxi-ofi-send-inappropriate-ioctl.log")
    (ofi,) = [e for e in told if e.kind == TRANSPORT_ERROR]
    assert ofi.details["transport"] == "OFI" and "completed with error" in ofi.details["error"]
    ring = events("nccl_network_error_p4d-ring-does-not-loop-back-host-prefixed.log")
    errors = [e for e in ring if e.kind == TRANSPORT_ERROR]
    assert errors and {e.details["transport"] for e in errors} == {"topology"}
    assert {e.details["host"] for e in errors} == {"compute-dy-p4d24xlarge-5"}
    benign = "node-1:3048:4991 [2] NCCL INFO NET/OFI Request 0x1 completed with error"  # INFO, not a warning
    assert FailureScanner().feed(benign) is None


def test_round_seven_wordings_a_store_barrier_timeout_mindspore_s_oom_and_an_ide_s_exit_code():
    """c10d 1.x's ``Timed out initializing process group in store based barrier`` is a collective's timeout (its
    traceback is that timeout's, no crash); MindSpore words an OOM ``Malloc for kernel output failed, Memory isn't
    enough``; PyCharm ends a run killed by Windows' access violation with ``Process finished with exit code
    -1073741819 (0xC0000005)`` (the corpus's train split)."""
    told = events("coqui-tts_collective_timeout_store-barrier-worker-count-1-of-8-kernprof.log")
    assert [e.kind for e in told] == [WATCHDOG_TIMEOUT] and told[0].details["backend"] == "c10d store"
    (oom,) = [e for e in events("mindspore_out_of_memory_sd-lora-malloc-kernel-output-memory-isnt-enough.log")
              if e.kind == CUDA_OOM]  # fmt: skip
    assert "Memory isn't enough" in oom.message
    (death,) = FailureScanner().feed(line_of("pytorch_rank_crashed_unet-windows-0xc0000005-epoch2.log", "exit code"))
    assert death.kind == PROCESS_FAILED and death.details["exit_code"] == -1073741819
    assert death.details["error"] == "access violation (exit code -1073741819)" and "signal" not in death.details
    assert FailureScanner().feed("Process finished with exit code 0") is None


def test_a_collective_s_exception_names_its_timeout_or_lost_link_where_no_line_did():
    from trainpulse_otel.logs.tracebacks import collective_exception

    def crash(exception: str, error: str) -> list:
        scanner = FailureScanner()
        lines = ["Traceback (most recent call last):", '  File "train.py", line 9, in step', f"{exception}: {error}"]
        return [f for line in [*lines, "next"] for f in scanner.feed(line) or []] + scanner.flush()

    told = crash("RuntimeError", "ProcessGroupXCCL: allreduce timed out after 1800000 ms")
    assert [f.kind for f in told] == [WATCHDOG_TIMEOUT, PROCESS_FAILED] and told[0].details["from_exception"]
    assert told[1].details["collective"] is True  # the crash is the timeout's consequence
    told = crash("RuntimeError", "Connection reset by peer while the communicator exchanged its buffers")
    assert [f.kind for f in told] == [TRANSPORT_ERROR, PROCESS_FAILED]
    assert [f.kind for f in crash("ValueError", "shapes (3,) and (4,) not aligned")] == [PROCESS_FAILED]
    assert collective_exception({"exception": "TimeoutError", "error": "math verification took too long"}) is None
    assert collective_exception({"exception": "RuntimeError", "error": "NCCL error: internal error"}) == "collective"
    # NCCL refusing the program's use of it, or a CUDA call failing under it: the process's own failure
    assert collective_exception({"exception": "RuntimeError", "error": "NCCL error: invalid usage"}) is None
    assert collective_exception({"exception": "DistBackendError", "error": "NCCL error: unhandled cuda error"}) is None


def test_round_nine_wordings_of_timeouts_transport_and_deaths():
    """JAX's barrier ``DEADLINE_EXCEEDED`` and c10d's ``DistStoreError: wait timeout`` are collectives timing out;
    PyTorch 2.4's desync report ``Timeout at collective: ALLREDUCE, #730``; Open MPI failing to open a TCP link;
    absl's ``*** SIGBUS received at time=``; zsh's ``zsh: abort``; libc++'s uncaught exception; cuBLAS's legacy
    ``!!!! kernel execution error.``; Metal's allocator out of memory (the corpus's train split)."""
    kinds = {
        "maxtext_collective_timeout_orbax-async-checkpoint-barrier-deadline-exceeded-8-of-16.log": WATCHDOG_TIMEOUT,
        "ms-swift_collective_timeout_grpo-vllm-weight-sync-store-barrier-diststoreerror-wait-timeout.log": WATCHDOG_TIMEOUT,
        "llamafactory_collective_timeout_multinode-desync-all-16-joined-allreduce-730-failure-detected-by-watchdog.log": WATCHDOG_TIMEOUT,
        "horovod_network_error_mpirun-oob-tcp-connect-firewall-ssh-debug.log": TRANSPORT_ERROR,
        "ray_rank_crashed_deepeyes-7b-raylet-sigbus-object-manager.log": PROCESS_FAILED,
        "mlx_rank_crashed_lora-qwen32b-iter990-metal-internal-error-zsh-abort.log": PROCESS_FAILED,
        "mlx_out_of_memory_lora-full-qwen3-8b-metal-insufficient-memory-zsh-abort.log": CUDA_OOM,
        "deepspeed_rank_crashed_bing-bert-mpirun-rank290-kernel-execution-error.log": PROCESS_FAILED,
    }
    assert_first_told(kinds)
    (seq,) = {e.details.get("seq") for e in events(next(iter(n for n in kinds if "llamafactory" in n)))}
    assert seq == 730
    assert events("deepspeed_rank_crashed_bing-bert-mpirun-rank290-kernel-execution-error.log")[0].rank == 290
    assert fatal.death("zsh: segmentation fault  python train.py")["signal"] == "SIGSEGV"
    uncaught = fatal.death("libc++abi: terminating due to uncaught exception of type std::runtime_error: boom")
    assert uncaught == {"signal": "SIGABRT", "error": "std::runtime_error: boom"}


def test_a_torchrun_table_a_paste_double_spaced_tells_each_rank():
    told = events("torchrun_rank_crashed_finetuning-8gpu-sigbus-table-double-spaced.log")
    dead = [e for e in told if e.kind == PROCESS_FAILED]
    assert dead and all(e.details.get("signal") == "SIGBUS" for e in dead)
    assert {0, 6, 7} <= {e.rank for e in dead}


def test_a_user_s_interrupt_is_the_job_stopped_not_a_crash():
    scanner = FailureScanner()
    lines = ["Traceback (most recent call last):", '  File "train.py", line 40, in <module>', "KeyboardInterrupt"]
    told = [f for line in [*lines, ""] for f in scanner.feed(line) or []] + scanner.flush()
    assert [(f.kind, f.details["reason"]) for f in told] == [(JOB_CANCELLED, "interrupted")]


def test_words_a_runtime_gives_its_failure_in_where_no_finer_form_reads_it():
    """The watchdog's ``failure detected by watchdog at work sequence id: N`` is a timeout where no line before told
    one (an excerpt starting there: the corpus's train split), and nothing after one; TensorFlow's collective
    aborted past its deadline is a timeout; CuPy's and Numba's allocators failing are OOMs (their own words)."""
    name = (
        "llamafactory_collective_timeout_multinode-desync-all-16-joined-allreduce-730-failure-detected-by-watchdog.log"
    )
    echo = line_of(name, "failure detected by watchdog")
    (told,) = FailureScanner().feed(echo)
    assert told.kind == WATCHDOG_TIMEOUT and told.details["seq"] == 730 and told.details["from_echo"]
    after = FailureScanner()
    after.feed(DOCUMENTED["monitored_barrier"])
    assert after.feed(echo) == []
    from trainpulse_otel.logs.tracebacks import collective_exception

    aborted = {"exception": "DeadlineExceededError", "error": "Collective ops is aborted by: group 1 failed"}
    assert collective_exception(aborted) == "timeout"
    for line in (
        "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes (allocated so far: 0 bytes).",
        "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY",
    ):
        scanner = FailureScanner()  # (Ascend's waits for its error block's device: told at the stream's end)
        (oom,) = (scanner.feed(line) or []) + scanner.flush()
        assert oom.kind == CUDA_OOM, line
    assert (
        FailureScanner().feed("Out of memory: Killed process 4242 (python) total-vm:1024kB")[0].kind == PROCESS_FAILED
    )


def test_round_ten_wordings_of_cuda_errors_ooms_and_deepep_timeouts():
    """Marian's ``CUDA error 999 'unknown error'``, the CUDA samples' ``CUDA error at …cu:1861 code=77(<unknown>)``,
    the runtime's words alone (``an illegal memory access was encountered``) are crashes; CuPy's ``out of memory to
    allocate`` / ``Out of memory allocating … bytes``, TensorFlow's ``Resource exhausted: failed to allocate memory``
    and Marian's ``CUDA error 2 'out of memory'`` are OOMs, but Ray's ``OutOfMemoryError`` of a node low on memory
    and a ``ResourceExhaustedError`` naming a file (a full disk) are not; DeepEP's kernels timing out are a
    collective's timeout (the corpus's train split)."""
    firsts = {
        "marian_rank_crashed_taskcluster-prefixed-cuda-error-999-unknown-error.log": PROCESS_FAILED,
        "dl4j_rank_crashed_mnist-anomaly-native-cuda-error-77-stream-sync-failed.log": PROCESS_FAILED,
        "gaussian-splatting_rank_crashed_feature-3dgs-forward-rasterizer-illegal-access-step0.log": PROCESS_FAILED,
        "chainer_out_of_memory_cupy5-imagenet-epoch3-out-of-memory-to-allocate.log": CUDA_OOM,
        "chainer_out_of_memory_windows-transformer-cupy7-out-of-memory-allocating-so-far.log": CUDA_OOM,
        "keras_out_of_memory_retinanet-example-bfc-resource-exhausted-failed-to-allocate-model-fit.log": CUDA_OOM,
        "marian_out_of_memory_transformer-2gpu-valid-after-up5000-cuda-error-2-call-stack.log": CUDA_OOM,
        "deepep_collective_timeout_internode-dispatch-forwarder-nvl-receiver-timeout-roce.log": WATCHDOG_TIMEOUT,
        "deepep_collective_timeout_h800-testing-passed-then-timeout-check-failed-rdma-sender-coordinator.log": (
            WATCHDOG_TIMEOUT
        ),
    }
    assert_first_told(firsts)
    ray = events("ray_rank_crashed_flingbot-sim-env-ray-oom-killer-node-low-memory.log")
    assert ray and not any(e.kind == CUDA_OOM for e in ray)
    disk = events("tensorflow_rank_crashed_siamese-step38000-dev-lines-tee-no-space-saver-resourceexhaustederror.log")
    assert disk and not any(e.kind == CUDA_OOM for e in disk)


def test_a_runtime_s_own_socket_call_failing_is_the_transport_s_failure():
    """DGL's ``…/network/tcp_socket.cc:180: recv error: Resource temporarily unavailable`` (an excerpt of
    awslabs/dgl-ke#229, the corpus's train split once merged) and Open MPI's TCP link; a socket warning that names
    no failed call is none."""
    from trainpulse_otel.logs.sockets import socket_failure

    dgl = "/dgl_workspace/dgl/src/graph/network/tcp_socket.cc:180: recv error: Resource temporarily unavailable"
    (told,) = FailureScanner().feed(dgl)
    assert told.kind == TRANSPORT_ERROR and told.details["call"] == "recv" and told.details["transport"] == "socket"
    assert socket_failure("A process or daemon was unable to complete a TCP connection")["transport"] == "tcp"
    assert socket_failure("[W socket.cpp:426] [c10d] The server socket cannot be initialized on [::]:29500") is None
    lightgbm = socket_failure("[LightGBM] [Fatal] Socket recv error, code: 54")  # network/socket_wrapper.hpp
    assert lightgbm is not None and lightgbm["call"] == "recv"
    assert socket_failure("Socket options: SO_KEEPALIVE set") is None


def test_a_paste_s_emphasis_hides_no_shell_report_of_a_death():
    """``**Killed**`` (a user bolding the line that matters; the corpus's train split, FastMaskRCNN)."""
    assert [e.details.get("signal") for e in FailureScanner().feed("**Killed**") or ()] == ["SIGKILL"]
    assert FailureScanner().feed("**Killed processes are restarted by the agent**") is None


def test_round_twelve_wordings_grpc_tpu_ascend_marian_and_a_table_s_oom():
    """TensorFlow's parameter server gone over gRPC (``UnavailableError``, ``"grpc_status":14``), the TPU compiler's
    ``Ran out of memory in memory space hbm``, Ascend's ``EL0004: Failed to allocate memory``, Marian 1.6's ``Error:
    out of memory - …/gpu/device.cu:30``; a torchrun table whose root-cause rank died of an OOM tells that OOM (the
    lines quoted are those of the round's excerpts)."""
    from trainpulse_otel.logs.sockets import socket_failure

    grpc = ':{"created":"@1663638747.953","description":"Error received from peer","grpc_status":14}'
    assert socket_failure(grpc)["transport"] == "grpc"
    assert socket_failure("ERROR:tensorflow:/job:worker/task:2 encountered: UnavailableError():Graph execution")
    for line in (
        "Compilation failure: Ran out of memory in memory space hbm. Used 12.34G of 8.00G hbm.",
        "EL0004: Failed to allocate memory.",
        "rtMalloc execute failed, reason=[driver error:out of memory][FUNC:FuncErrorReason]",
        "[2018-11-24 01:54:21] Error: out of memory - /home/u/marian-dev/src/tensors/gpu/device.cu:30",
    ):
        scanner = FailureScanner()  # (Ascend's waits for its error block's device: told at the stream's end)
        (oom,) = (scanner.feed(line) or []) + scanner.flush()
        assert oom.kind == CUDA_OOM, line
    scanner = FailureScanner()
    table = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-05-19_14:55:17",
        "  host      : devgpu020",
        "  rank      : 4 (local_rank: 4)",
        "  exitcode  : 1 (pid: 340221)",
        "  error_file: /tmp/torchelastic/attempt_0/4/error.json",
        "  traceback : Traceback (most recent call last):",
        "      torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.90 GiB.",
        "============================================================",
    ]
    told = [f for line in [*table, "after"] for f in scanner.feed(line) or []] + scanner.flush()
    assert [(f.kind, f.rank) for f in told] == [(CUDA_OOM, 4), (PROCESS_FAILED, 4)]


def test_a_transport_error_names_the_rank_nccl_s_info_lines_gave_its_process():
    """NCCL_DEBUG=INFO prints each communicator a process joins (``host:pid:tid [dev] NCCL INFO comm 0x… rank r
    nranks n``); a WARN the same process prints later is that rank's, its rank in its largest communicator (the
    job's own, not a tensor-parallel group's)."""
    scanner = FailureScanner()
    scanner.feed(
        "ta1-1:2712:2824 [0] NCCL INFO comm 0x7fa94834c010 rank 5 nranks 8 cudaDev 0 busId 3b000 - Init COMPLETE"
    )
    scanner.feed(
        "ta1-1:2712:2824 [0] NCCL INFO comm 0x7fa94834c011 rank 1 nranks 2 cudaDev 0 busId 3b000 - Init COMPLETE"
    )
    warn = "ta1-1:2712:2824 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<3456> with error 12"
    (told,) = scanner.feed(warn)
    assert told.kind == TRANSPORT_ERROR and told.rank == 5 and told.details["host"] == "ta1-1"
    other = warn.replace("ta1-1:2712", "ta1-0:2668")
    assert FailureScanner().feed(other)[0].rank is None  # a process no INFO line placed: no rank


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        (
            "python3: ../nptl/pthread_mutex_lock.c:81: __pthread_mutex_lock: Assertion `mutex->__data.__owner == 0' failed.",
            "SIGABRT",
        ),
        ("Segmentation fault: 11", "SIGSEGV"),  # macOS's bash adds the signal's number
        ("Illegal instruction (core dumped)", "SIGILL"),
        ("Floating point exception (core dumped)", "SIGFPE"),
    ],
)
def test_glibc_s_assertion_and_the_shell_s_other_signal_words_are_deaths(line, signal):
    assert (fatal.death(line) or {}).get("signal") == signal


def test_a_shell_sentence_that_begins_with_a_signal_s_word_is_no_death():
    assert fatal.death("Illegal instruction set for this CPU, falling back to the generic kernel") is None


def test_a_wrapper_s_word_that_training_failed_with_a_negative_exit_code_is_its_signal():
    """A fine-tuning wizard's ``❌ Training failed with exit code -9`` (macOS, the corpus's train split): SIGKILL;
    a positive code from such a wrapper says nothing of a signal and is left to the lines around it."""
    (told,) = FailureScanner().feed("❌ Training failed with exit code -9")
    assert told.details["signal"] == "SIGKILL" and told.details["launcher"] == "wrapper"
    assert FailureScanner().feed("pip install failed with exit code 1") is None


def test_jittor_s_overflowing_gpu_memory_is_an_out_of_memory():
    """Jittor's allocator (the corpus's train split, Jittor/jittor#396): ``GPU memory is overflow, please reduce your
    batch_size or data size!`` before the CUDA errors and aborts it causes."""
    (told,) = FailureScanner().feed("GPU memory is overflow, please reduce your batch_size or data size!")
    assert told.kind == CUDA_OOM


def test_an_npu_kernel_failing_on_the_device_is_a_crash():
    """MindSpore on an Ascend NPU (the corpus's train split, candle-org/MindAct#1752): ``Launch kernel failed:
    Bprop/gradDense/Reshape-op278``, then CANN's ``E39999: … an exception occurred during AICPU execution``."""
    from trainpulse_otel.logs.runtimes import failure_said

    assert failure_said("Launch kernel failed: Bprop/gradDense/Reshape-op278")[0] == "crash"
    cann = "E39999: 2024-10-20-22:34:40.965.193  The error from device(chipId:0, dieId:0), serial number is 3, an exception occurred during AICPU execution, stream_id:2"
    assert failure_said(cann)[0] == "crash"
    assert failure_said("Launch kernel failed: ") is None


def test_the_flight_recorder_analyzer_names_the_ranks_that_did_not_join():
    """``torchfrtrace``'s ``missing ranks: {1}`` under ``Not all ranks joining collective 5 at entry 4`` (PyTorch's
    flight-recorder tutorial, the corpus's train split), and gloo's timeout as that tutorial prints it."""
    from trainpulse_otel.logs.collectives import gloo_timeout, stalled_collective

    assert stalled_collective("missing ranks: {1}") == {"backend": "flight recorder", "missing_ranks": [1]}
    assert stalled_collective("  Missing ranks are {0, 3} ")["missing_ranks"] == [0, 3]
    assert stalled_collective("the missing ranks: {1} are listed below") is None
    said = gloo_timeout("[Rank 0] Caught timeout: RuntimeError: Timed out waiting 15000ms for recv operation")
    assert said == {"backend": "gloo", "op": "recv", "timeout_ms": 15000}


def test_ray_s_words_of_a_dead_worker_are_a_crash_and_ray_train_names_its_rank():
    """The raylet's ``A worker died or was killed while executing a task by an unexpected system error`` (verl, Ray's
    release tests) and Ray Train's ``Worker 0 has failed.`` (the worker's rank): the corpus's train split."""
    verl = events("verl_rank_crashed_search-r1-ray-worker-died.log")
    assert verl and verl[0].kind == PROCESS_FAILED
    ray = events("raytrain_rank_crashed_worker-sigkill-oom-release-test.log")
    assert [e.rank for e in ray if e.kind == PROCESS_FAILED] == [None, 0]


def test_nccl_s_own_allocation_failing_names_its_host_and_device():
    """``ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'``: NCCL's prefix names
    the host and the CUDA device its process drives (a multi-node LLM run, the corpus's train split)."""
    (oom,) = [e for e in events("nccl_out_of_memory_calloc-multinode-llm.log") if e.kind == CUDA_OOM]
    assert oom.gpu_index == 3 and oom.details["host"] == "ng30903"


def test_grep_s_line_numbers_before_torchrun_s_prefix_leave_the_rank_said():
    """A paste of ``grep -n`` over a torchrun log: ``1129:[default0]:[rank0]: torch.OutOfMemoryError: …``."""
    ooms = [e for e in events("megatron_out_of_memory_flagscale-lora-seq9728-metax.log") if e.kind == CUDA_OOM]
    assert ooms and {e.rank for e in ooms} == {0} and {e.gpu_index for e in ooms} == {0}


def test_nccl_s_return_code_trace_from_its_network_says_a_transport_error_where_no_warning_did():
    """``dgxa100:1050:1316 [0] NCCL INFO include/net.h:25 -> 2`` after the socket channels' set-up (NVIDIA/nccl#697,
    the corpus's train split): a system error returned up from the network's files; a code from elsewhere, or a remote
    error's (the peer's), is none."""
    told = events("nccl_network_error_socket-system-error-two-nodes.log")
    assert [e.kind for e in told] == [TRANSPORT_ERROR] and told[0].details["error"] == "ncclSystemError"
    assert c.nccl_trace("host:1:2 [0] NCCL INFO misc/socket.cc:749 -> 6") is None  # the peer's error, its own to tell
    assert c.nccl_trace("host:1:2 [0] NCCL INFO init.cc:1079 -> 2") is None
    assert c.nccl_trace("host:1:2 [0] NCCL INFO transport/p2p.cc:204 -> 1") is None


def test_tensorflow_s_allocator_saying_its_failed_attempt_is_no_failure_is_no_oom():
    """``Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.46GiB with freed_by_count=0. The caller indicates
    that this is not a failure, but may mean …``: a healthy Keras run goes on for 14 epochs (the corpus's train split)."""
    assert not [
        e for e in events("keras_healthy_tf-bfc-allocator-ran-out-of-memory-not-a-failure.log") if e.kind == CUDA_OOM
    ]


def test_the_store_s_socket_trailer_is_its_transport_error_not_a_crash():
    """``[rank2]:[W901 …] [c10d] recvValue failed … Connection reset by peer`` then, without the prefix, ``Exception
    raised from recvBytes at …/c10d/Utils.hpp:679``: the store's socket, whatever line stands before the trailer in
    its stream (qibin0506/Cortex#17, the corpus's train split)."""
    kinds = [e.kind for e in events("custom-loop_network_error_tcpstore-reset-after-resume.log")]
    assert kinds and set(kinds) == {TRANSPORT_ERROR}


def test_rocm_s_allocation_failure_and_glog_s_signal_line_are_read_on_every_accelerator():
    """TensorFlow on ROCm: ``failed to allocate 3.08G (3304535552 bytes) from device: HIP_ERROR_OutOfMemory``
    (keras-team/keras#13889); Lightning on a TPU core: ``*** SIGSEGV (@0x8cb71200), see … received by PID 24736``
    (Lightning-AI/pytorch-lightning#8183): the corpus's train split."""
    hip = "E tensorflow/stream_executor/rocm/rocm_driver.cc:600] failed to allocate 3.08G (3304535552 bytes) from device: "
    assert told_alone(hip + "HIP_ERROR_OutOfMemory") == [CUDA_OOM]
    assert told_alone(
        "*** SIGSEGV (@0x8cb71200), see gl__________25#s15 received by PID 24736 (TID 24736) on cpu 25;"
    ) == [PROCESS_FAILED]


def test_a_watchdog_line_a_paste_broke_after_its_colon_is_read_with_its_work():
    """``[rank3] Watchdog caught collective operation timeout:`` then ``WorkNCCL(SeqNum=64214, OpType=ALLGATHER, …``
    on a line of its own (NeMo-RL on GB200, the search tool's code index 62348282451: the corpus's train split)."""
    (timeout,) = [e for e in events("nemo-rl_collective_timeout_gb200-grpo-dsv4-offload-refit-hang.log")
                  if e.kind == WATCHDOG_TIMEOUT]  # fmt: skip
    assert timeout.details["op"] == "ALLGATHER" and timeout.details["seq"] == 64214
    assert told_alone("[rank3] Watchdog caught collective operation timeout:") == []  # alone, no work: no timeout


def test_elastic_s_agent_failing_to_renew_its_rendezvous_is_a_warning_not_a_store_timeout():
    """torchelastic's ``The node '…' has failed to send a keep-alive heartbeat to the rendezvous '2092' due to an
    error of type RendezvousTimeoutError.`` after an MLPerf OpenFold run's ``run_stop`` (mlcommons/hpc_results_v3.0,
    the corpus's train split); a rendezvous that timed out is still a store's timeout."""
    assert not [e for e in events("mlperf_healthy_openfold-clemson-rendezvous-warnings.log")
                if e.kind == WATCHDOG_TIMEOUT]  # fmt: skip
    raised = "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
    assert c.stalled_collective(raised) == {"backend": "c10d store", "op": "store wait"}


def test_tensorflow_s_oom_takes_its_gpu_from_the_line_after_it_that_names_one():
    """TF 1's ``OOM when allocating tensor with shape[…]`` names no device; its op's ``[[Node: … _device=
    "/job:localhost/replica:0/task:0/gpu:0"`` or the allocator's ``Allocator (GPU_0_bfc)`` after it does (the
    corpus's train split: a TF-slim run and a Keras ``model.fit``); told before the crash its traceback is."""
    for name in ("tensorflow_out_of_memory_slim-resource-exhausted-gpu0.log",
                 "keras_out_of_memory_bfc-allocator-oom-adam-mul-model-fit.log"):  # fmt: skip
        told = events(name)
        (oom,) = [e for e in told if e.kind == CUDA_OOM]
        assert oom.gpu_index == 0 and "OOM when allocating" in oom.message and told[0] is oom
    scanner = FailureScanner()
    assert scanner.feed("Resource exhausted: OOM when allocating tensor with shape[123008,500]") == []
    assert scanner.feed("some other line") is None and scanner.feed("and another") is None
    (alone,) = scanner.feed("the third line after it") or []  # none named its GPU: told as it was
    assert alone.kind == CUDA_OOM and alone.gpu_index is None


def test_the_heartbeat_monitor_s_line_a_terminal_wrapped_inside_its_words_is_read_whole():
    """``… ProcessGroupNCCL's wa`` / ``tchdog got stuck for 480 seconds …`` (the corpus's train split's GRPO heartbeat
    excerpt wrapped at 120 columns): the line is held and read with its end."""
    text = (TRAIN / "simpler1_collective_timeout_grpo-eval-then-heartbeat-480s.log").read_text(encoding="utf-8")
    wrapped = [line[i : i + 120] for line in text.splitlines() for i in range(0, len(line) or 1, 120)]
    assert any(line.endswith("ProcessGroupNCCL's wa") for line in wrapped)
    reader = LogReader()
    told = [e for n, line in enumerate(wrapped, 1) for e in reader.feed(LogLine(line, "excerpt.log", n))]
    (stuck,) = [e for e in told + reader.flush() if isinstance(e, LogEvent) and e.kind == WATCHDOG_TIMEOUT]
    assert stuck.details["timeout_ms"] == 480_000 and stuck.details["monitor"] == "heartbeat"


def test_a_driver_call_failing_with_a_fatal_code_is_a_crash():
    """PhysX (Omniverse Isaac Gym) ``SynchronizeStreams cuEventRecord failed with error 700``: CUDA's illegal address
    by its number (the corpus's train split); a call failing with another code says nothing of a crash."""
    told = events("omniisaacgymenvs_rank_crashed_physx-error-700.log")
    assert told and told[0].kind == PROCESS_FAILED and "cuEventRecord failed with error 700" in told[0].details["error"]
    assert told_alone("PhysX error: SynchronizeStreams cuEventRecord failed with error 700") == [PROCESS_FAILED]
    assert told_alone("cuInit failed with error 100") == []  # no device: no crash of a running job


def test_mpirun_s_timestamp_glued_to_its_tag_is_cut_and_the_host_named():
    """``mpirun --timestamp-output --tag-output``: ``Fri Aug 11 12:31:45 2023[1,0]<stdout>:tomte401:1850301:1881341 [0]
    … NCCL WARN Cuda failure 'invalid argument'`` (the corpus's train split): the stamp and the tag are cut, so NCCL's
    prefix names the host and the tag the rank."""
    rank, when, rest = split_prefixes(line_of("megatron_rank-crashed_nccl-cuda-invalid-argument-tomte401.log", "[1,3]"))
    assert rank == 3 and when is not None and rest.startswith("tomte401:1850304:1881110 [3] ")
    crashes = [e for e in events("megatron_rank-crashed_nccl-cuda-invalid-argument-tomte401.log")
               if e.kind == PROCESS_FAILED]  # fmt: skip
    assert {(e.rank, e.details["host"]) for e in crashes} == {(0, "tomte401"), (3, "tomte401")}


def test_a_timeout_a_traceback_raises_keeps_the_rank_and_work_its_words_name():
    """PyTorch 1.x's ``RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=1,
    OpType=BROADCAST, …)`` ending a traceback (ultralytics/ultralytics#3688, the corpus's train split)."""
    told = events("ultralytics_collective_timeout_ddp-setup-broadcast.log")
    (timeout,) = [e for e in told if e.kind == WATCHDOG_TIMEOUT]
    assert timeout.details["pg_rank"] == 1 and timeout.details["op"] == "BROADCAST" and timeout.details["seq"] == 1


def test_ascend_s_oom_takes_its_device_from_its_error_block():
    """``EL0004: Failed to allocate memory.`` / ``rtMalloc execute failed, reason=[driver error:out of memory]``,
    then the block's ``device(chipId:7, …`` or ``device_id:0`` (the corpus's train split: LLaMA-Factory and Baichuan 2
    on NPUs)."""
    for name, gpu in (("llamafactory_out_of_memory_npu-ds3-offload-el0004.log", 7),
                      ("deepspeed_out_of_memory_ascend-baichuan2-zero3-el0004-rtmalloc-driver-oom.log", 0)):  # fmt: skip
        (oom,) = [e for e in events(name) if e.kind == CUDA_OOM]
        assert oom.gpu_index == gpu, name


def test_intel_s_level_zero_running_out_is_an_oom_of_the_rank_that_says_it():
    """An Aurora torchtitan run (ezpz's docs, round 45): ``[rank7]: RuntimeError: level_zero backend failed with
    error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)`` after step 18; Unified Runtime's device-memory error alike."""
    (told,) = [e for e in events("torchtitan_out_of_memory_aurora-ur-out-of-resources.log") if e.kind == CUDA_OOM]
    assert told.rank == 7
    assert told_alone(
        "RuntimeError: level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"
    ) == [CUDA_OOM]
