"""The runtimes around a job fail in their own words (:mod:`trainpulse_otel.logs.runtimes`): each line here is a real
console line quoted verbatim by the source it cites (the runtime's own tests, docs or a user's paste there), fed
alone to the reader as a user pastes a last line.
"""

from __future__ import annotations

import pytest

from tests.logs.excerpts import told_alone
from trainpulse_otel.logs import runtimes
from trainpulse_otel.samples import (
    CUDA_OOM,
    DRIVER_XID,
    GPU_FAULT,
    PROCESS_FAILED,
    TRANSPORT_ERROR,
    WATCHDOG_TIMEOUT,
)

# (the line, the event it tells first)  # where it is quoted
QUOTED = [
    (
        "[rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 1] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.20.5",
        TRANSPORT_ERROR,
    ),  # pytorch/pytorch:torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    (
        "[cstone-00612][[21785,1],35][btl_tcp_frag.c:216:mca_btl_tcp_frag_recv] mca_btl_tcp_frag_recv: readv failed: Connection reset by peer (104)",
        TRANSPORT_ERROR,
    ),  # open-mpi/ompi:v4.1.6:opal/mca/btl/tcp/btl_tcp_frag.c:242
    (
        "UD endpoint 0xc576d0 to <no debug data>: unhandled timeout error",
        TRANSPORT_ERROR,
    ),  # openucx/ucx:src/uct/ib/ud/base/ud_ep.c:296
    (
        "F0926 17:26:32.075587  157988 client.h:77] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
        PROCESS_FAILED,
    ),  # openxla/xla:xla/pjrt/distributed/client.h
    (
        " 0: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
        PROCESS_FAILED,
    ),  # openxla/xla:xla/tsl/distributed_runtime/coordination/coordination_service.cc
    (
        "E0218 03:50:19 rendezvous.cc:100] [id=1] This thread has been waiting for `acquire clique for rank 3; clique=devices=[4,5,6,7]; is_p2p=0; run_id=-1558191007` for 10 seconds and may be stuck. Expected 4 threads to join the rendezvous, but not all of them arrived on time.",
        WATCHDOG_TIMEOUT,
    ),  # openxla/xla:xla/service/rendezvous.cc
    (
        "Collective ops is aborted by: failed to connect to all addresses",
        TRANSPORT_ERROR,
    ),  # tensorflow/tensorflow:tensorflow/core/common_runtime/base_collective_executor.cc
    (
        "BaseCollectiveExecutor::StartAbort UNKNOWN: Error invoking NCCL: unhandled cuda error",
        PROCESS_FAILED,
    ),  # tensorflow/tensorflow:tensorflow/core/common_runtime/base_collective_executor.cc
    (
        "[PID: 3448331] 2025-12-04-21:59:08.232.310 Execution Error ROCE CQE(EI0013): An error CQE occurred during operator execution. Local information: server 127.0.0.1, device ID 0, device IP 127.10.0.1. Peer information: server 127.0.0.2, device ID 1, device IP 127.10.0.2.",
        TRANSPORT_ERROR,
    ),  # hicann/hccl:docs/zh/user_guide/fault_diagnosis/task_exec_stage.md:257
    (
        "RuntimeError: level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
        CUDA_OOM,
    ),  # intel/llvm:sycl/source/detail/adapter_impl.hpp
    (
        "RuntimeError: level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
        GPU_FAULT,
    ),  # intel/llvm:sycl/source/detail/adapter_impl.hpp
    (
        "what():  Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) -5 (PI_ERROR_OUT_OF_RESOURCES)",
        CUDA_OOM,
    ),  # intel/llvm:sycl/source/detail/plugin.hpp
    (
        "Out of Memory!!! Request memory size: 33100113920B, Memory Statistic:",
        CUDA_OOM,
    ),  # mindspore-ai/mindspore: AscendMemAdapter::MallocStaticDevMem
]


@pytest.mark.parametrize(("line", "kind"), QUOTED, ids=[line[:40] for line, _ in QUOTED])
def test_a_runtime_s_failure_line_alone_is_told_as_its_failure(line, kind):
    assert told_alone(line)[:1] == [kind]


@pytest.mark.parametrize(
    ("line", "kind", "rank"),
    [
        ("MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD", "crash", 3),  # Open MPI's help text
        ("Task 5 heartbeat timeout. This indicates that the remote task has failed", "crash", 5),  # XLA's coordination
        ("[PG ID 0 PG GUID 0(default_pg) Rank 1]  remote error detected from rank: 7", "crash", 7),  # PyTorch 2.6+
        (
            "[Rank 2] Work 17 timed out in blocking wait (TORCH_HCCL_BLOCKING_WAIT=1 or HCCL_BLOCKING_WAIT=1).",
            "timeout",
            None,
        ),
    ],
)
def test_a_runtime_s_words_name_the_rank_at_fault(line, kind, rank):
    said = runtimes.failure_said(line)
    assert said is not None and said[0] == kind and said[2] == rank


def test_the_watchdog_s_nccl_error_is_classed_by_its_words():
    link = "[Rank 0] NCCL watchdog thread terminated with exception: NCCL error: unhandled system error, NCCL version 2.18.1"
    crash = (
        "[Rank 0] NCCL watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered"
    )
    assert runtimes.failure_said(link)[0] == "link"
    assert told_alone(crash)[:1] == [PROCESS_FAILED]
    assert runtimes.failure_said("training step 10, loss 2.3") is None


def test_the_store_s_peer_gone_at_a_healthy_job_s_end_is_no_failure():
    """PyTorch 2.4+'s heartbeat threads print these when rank 0's store shuts down as the job ends (its own words:
    ``maybe TCPStore server has shut down too early``): no failure of their own."""
    ended = (
        "[rank3]:[W310 15:54:45.576772833 ProcessGroupNCCL.cpp:1802] [PG ID 0 PG GUID 0 Rank 3] Failed to check the "
        '"should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Failed to recv, '
        "got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"
    )
    assert told_alone(ended) == []


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        # real console lines, quoted verbatim where the comment says
        (  # NVIDIA/open-gpu-kernel-modules:kernel-open/nvidia/nv.c (a worker's kernel log)
            "Dec  2 11:38:27 worker4 kernel: [  199.234935] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5",
            GPU_FAULT,
        ),
        (  # NVIDIA/open-gpu-kernel-modules:src/nvidia/src/libraries/utils/nvassert.c
            (
                "[Sun Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required "
                "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874"
            ),
            GPU_FAULT,
        ),
        (  # nvidia-smi, quoted in CFSworks/nvml_fix#36
            (
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
                "NVIDIA driver is installed and running."
            ),
            GPU_FAULT,
        ),
        (  # a CUDA kernel's device-side assert (pytorch/pytorch:aten/src/ATen/native/cuda/IndexKernel.cu)
            (
                "/opt/conda/conda-bld/pytorch_1704987290659/work/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): "
                'block: [59829,0,0], thread: [120,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of '
                'bounds"` failed.'
            ),
            PROCESS_FAILED,
        ),
        # DCGM's health messages (NVIDIA/DCGM:dcgmlib/dcgm_errors.h), values filled in
        ("Detected 2 volatile double-bit ECC error(s) in GPU 3.", GPU_FAULT),
        ("GPU 5 had uncorrectable memory errors and row remapping failed.", GPU_FAULT),
        ("GPU 1's NvLink link 4 is currently down", GPU_FAULT),
        # Linux 6.5's AER wording (torvalds/linux:drivers/pci/pcie/aer.c)
        (
            "pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer",
            GPU_FAULT,
        ),
        # the NIC's (torvalds/linux:drivers/net/ethernet/mellanox/mlx5/core/health.c), values filled in
        (
            "mlx5_core 0000:18:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count",
            TRANSPORT_ERROR,
        ),
        ("RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED", CUDA_OOM),  # pytorch's CuFFTUtils.h
    ],
)
def test_a_device_or_its_link_failing_in_its_driver_s_words(line, kind):
    assert told_alone(line)[:1] == [kind]


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        # launchers and clusters, in their sources' words (values filled in where the source is a format string)
        ("ERROR:composer.cli.launcher:Rank 3 crashed with exit code -9.", PROCESS_FAILED),  # composer/cli/launcher.py
        (
            "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)",
            PROCESS_FAILED,
        ),  # Vertex AI
        (  # SchedMD/slurm:src/plugins/task/cgroup/task_cgroup_memory.c (23.02+)
            "slurmstepd: error: Detected 6 oom_kill events in StepId=1742530.0. Some of the step tasks have been OOM Killed.",
            PROCESS_FAILED,
        ),
        (  # NVIDIA/k8s-device-plugin:internal/rm/health.go
            "XidCriticalError: Xid=79 on Device=GPU-4b0e7c2a; marking device as unhealthy.",
            DRIVER_XID,
        ),
    ],
)
def test_launchers_and_clusters_name_what_died(line, kind):
    assert told_alone(line)[:1] == [kind]


def test_a_rank_that_exited_cleanly_is_no_crash():
    assert told_alone("Global rank 0 (PID 4242) exited with code 0") == []
