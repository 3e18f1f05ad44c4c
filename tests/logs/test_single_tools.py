"""Forms one tool writes, and what a paste does to a line: real excerpts of the corpus's ``train`` split.

llm.c's log file, WaveGlow's bare ``step:\\tloss`` lines (a negative log-likelihood), Vowpal Wabbit's progressive
validation table, R's reprex mark before LightGBM's cross-validation rounds, Ray's coloured actor label whose escape
bytes a paste lost (its ``ip=`` the failing host), faulthandler's ``Fatal Python error: Aborted``; MLPerf's records
that number progress without a loss, NCCL's SHARP fallback, Ascend's event wait timeout.
"""

from __future__ import annotations

import math

import pytest

from tests.logs.excerpts import TRAIN, read_excerpt, replayed_signals, reports
from tests.logs.excerpts import excerpt_signals as signals
from trainpulse_otel.config import Settings
from trainpulse_otel.diagnose.detectors.numerics import RollingLosses
from trainpulse_otel.logs import LogLine
from trainpulse_otel.logs.generic import PAIR
from trainpulse_otel.logs.labels import without_label
from trainpulse_otel.logs.lines import nccl_host, without_escapes
from trainpulse_otel.runtime import replay_logs
from trainpulse_otel.samples import LogEvent


def test_llm_c_s_log_file_numbers_its_steps_and_train_losses_not_its_eval_losses():
    # ``s:0 tel:11.0095`` (the eval loss), then ``s:0 trl:11.0116 lr:0.000001 norm:14.96`` every step
    read = reports("llmc_healthy_gpt2-124m-main-log.log")
    assert len(read) >= 290 and read[0].global_step == 0 and read[0].loss == 11.0116 and read[0].grad_norm == 14.96
    assert [r.global_step for r in read[:3]] == [0, 1, 2]


def test_waveglow_s_bare_step_and_loss_lines_are_reports_and_a_jump_from_a_negative_baseline_is_a_spike(tmp_path):
    # ``123891: -4.845523357`` then ``123892: 40490.179687500``: a negative log-likelihood leaps
    read = reports("pytorch_loss_spike_waveglow-nll-40490-then-initial-level.log")
    assert len(read) == 32 and read[0].global_step == 123873 and read[0].loss == -5.480178833
    spike = signals("pytorch_loss_spike_waveglow-nll-40490-then-initial-level.log", tmp_path)["loss_spike"]
    assert spike["step"] == 123892 and spike["baseline_loss"] < 0 and spike["spike_ratio"] is None  # (no ratio of it)


def test_a_noisy_negative_log_likelihood_is_no_spike(tmp_path):
    # WaveFlow's NLL between -3.6 and -4.3 (the thread asks whether a negative loss is normal)
    assert reports("paddle_healthy_parakeet-waveflow-negative-nll.log")
    assert "loss_spike" not in signals("paddle_healthy_parakeet-waveflow-negative-nll.log", tmp_path)


def test_vowpal_wabbit_s_progressive_validation_table_is_progress_its_early_averages_no_spike(tmp_path):
    # ``0.000000 0.000000  11  1.0 …`` to ``0.064941 0.046387  4106  4096.0 …``: the example counter is the step
    read = reports("vowpalwabbit_healthy_warm-cb-progressive-table.log")
    assert [r.global_step for r in read[:3]] == [11, 12, 14] and all(r.loss is None for r in read)
    assert signals("vowpalwabbit_healthy_warm-cb-progressive-table.log", tmp_path) == {}


def test_r_s_reprex_mark_is_cut_and_lightgbm_s_cross_validation_rounds_are_steps():
    # ``#>  [1]:\tvalid's rmse:460.7+12.3`` every 100 rounds: validation only, so steps without a training loss
    read = reports("lightgbm_healthy_r-cv-rounds-mean-std.log")
    assert [r.global_step for r in read[-2:]] == [1901, 2000] and all(r.loss is None for r in read)


def test_ray_s_label_whose_escapes_a_paste_lost_is_cut_and_names_the_worker_s_host(tmp_path):
    line = "[36m(WorkerDict pid=3175143, ip=10.49.193.113)[0m Fatal Python error: Aborted"
    _, cut = without_label(without_escapes(LogLine(line, "paste.log", 1)))
    assert cut.text == "Fatal Python error: Aborted" and cut.host == "10.49.193.113" and cut.node is None
    [first, *_] = [
        e for e in read_excerpt("verl_rank_crashed_worker-abort-illegal-memory.log") if isinstance(e, LogEvent)
    ]
    assert first.kind == "process_failed" and first.details["signal"] == "SIGABRT" and first.hostname == "10.49.193.113"
    crashed = signals("verl_rank_crashed_worker-abort-illegal-memory.log", tmp_path)["rank_crashed"]
    assert crashed["hostname"] == "10.49.193.113"


def test_mlperf_s_epoch_ends_and_evaluations_are_progress_and_its_run_stop_ends_the_watch(tmp_path):
    # BERT's log prints no train_loss: its eval_accuracy records number the samples reached
    bert = reports("mlperf_healthy_bert-h100-not-converged-aborted.log")
    assert len(bert) == 18 and all(r.loss is None for r in bert)
    assert [r.global_step for r in bert[:2]] == [150135, 299622]
    # Stable Diffusion evaluates its checkpoints for hours after step 6000, then says run_stop: no stall — without
    # the run_stop record, the same hours are one
    name = "pytorch_healthy_mlperf-stable-diffusion-8xh100.log"
    assert signals(name, tmp_path) == {} and max(r.global_step for r in reports(name)) == 6000
    lines = (TRAIN / name).read_text(encoding="utf-8").splitlines()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "excerpt.log").write_text("\n".join(line for line in lines if '"run_stop"' not in line) + "\n")
    assert "training_stalled" in replayed_signals(cut / "excerpt.log")


def test_nccl_falling_back_from_sharp_and_collnet_or_skipping_a_device_is_no_network_failure(tmp_path):
    # ``NCCL WARN NET/IB :SHARP coll init error: Cannot create SHArP job(-11)`` on a healthy 128-rank MLPerf run
    events = [e for e in read_excerpt("mlperf_healthy_rnnt-azure-16node-sharp-warn.log") if isinstance(e, LogEvent)]
    assert events == [] and signals("mlperf_healthy_rnnt-azure-16node-sharp-warn.log", tmp_path) == {}
    # NCCL's startup probe skipping an IB device it cannot open (``Call to ibv_open_device failed``, ``NET/IB : Unable
    # to open device mlx5_an0``) on every rank of a healthy 8-GPU run that then trains to its wall-clock cap
    name = "modded-nanogpt_healthy_parameter-golf-8gpu-ib-warn.log"
    assert not [e for e in read_excerpt(name) if isinstance(e, LogEvent)] and "network_error" not in signals(
        name, tmp_path
    )


def test_ascend_s_event_wait_timeout_during_task_execution_is_a_collective_timeout(tmp_path):
    # MindSpore on 32 Ascend ranks: ``event wait timeout occurred during task execution, …, timeout=1980``
    raised = signals("mindspore_collective_timeout_ascend-32rank-event-wait.log", tmp_path)
    assert set(raised) == {"collective_timeout"}


def test_a_model_s_name_before_its_epoch_header_numbers_the_epochs_and_the_next_model_starts_a_series(tmp_path):
    # ``SqueezeNetBypass - Epoch 0/49`` then ``train Loss: 2.5084 Acc: 0.3273``; three models, each from epoch 0
    read = reports("pytorch_healthy_squeezenet-train-log-zh.log")
    assert [r.global_step for r in read[:2]] == [0, 1] and read[0].loss == 2.5084
    assert "loss_spike" not in signals("pytorch_healthy_squeezenet-train-log-zh.log", tmp_path)


def test_yolact_s_iteration_line_gives_its_iteration_and_total_loss():
    # ``[ 10]    1000 || B: 2.486 | C: 2.181 | M: 1.478 | S: 0.064 | T: 6.209 || ETA: 93 days, 12:50:16 || timer: 2.703``
    read = reports("yolact_healthy_eta-93-days-then-map.log")
    assert [(r.global_step, r.loss) for r in read[:2]] == [(1000, 6.209), (1010, 6.017)]


def test_cyclegan_s_loss_terms_are_summed_a_nan_term_makes_the_sum_nan_and_a_jump_is_a_spike(tmp_path):
    # ``(epoch: 1, iters: 100, time: 0.507, data: 0.091) D_A: 0.201 G_A: 0.297 cycle_A: 4.741 …``: no word says loss
    healthy = reports("pix2pix-cyclegan_healthy_cyclegan-horse2zebra-loss-log-gan-term-names.log")
    assert healthy[0].global_step == 100 and round(healthy[0].loss, 2) == 9.56
    nan = reports("cyclegan_nonfinite_loss_horse2zebra-all-nan.log")
    assert nan and all(math.isnan(r.loss) for r in nan)
    assert "loss_spike" in signals("pytorch_loss_spike_cyclegan-epoch101-d-g-jump.log", tmp_path)  # 0.2 -> 61.8
    assert signals("cyclegan_healthy_noisy-batch1-losses.log", tmp_path) == {}  # batch-size-1 noise: no spike


def test_a_step_before_its_train_loss_a_fraction_in_parentheses_and_flower_s_rounds_are_progress():
    # Sonnet's VQ-VAE example: ``800 train loss: 0.153761 recon_error: 0.119 perplexity: 53.559 vqvae loss: 0.035``
    assert [(r.global_step, r.loss) for r in reports("sonnet_healthy_vqvae-cifar10-10k-steps.log")[:1]] == [
        (100, 0.523625)
    ]
    # DGL-KE: ``[proc 0][Train](2000/24000) average loss: 0.3779255014657974``
    assert [r.global_step for r in reports("dgl-ke_healthy_transe-fb15k-single-gpu.log")][:2] == [1900, 2000]
    # Flower's server: ``fit progress: (1, 1.2983922035577562, {'accuracy': 0.6792}, 8.57716525)``
    assert [r.global_step for r in reports("flower_healthy_fedavg-5-rounds-mnist.log")] == [1, 2, 3, 4, 5]
    # mockingbird's ``Step: 424k`` is no step 42 (a number a letter runs on from is none): its ``at step 423500``
    steps = [r.global_step for r in reports("mockingbird_rank_crashed_no-space-left-saving.log")]
    assert steps[:2] == [423500, 424000] and 42 not in steps


def test_launchers_name_the_dead_rank_and_its_host_where_the_lines_show_them():
    # horovodrun: ``Process 0 exit with status code 137.``
    [crash, *_] = [e for e in read_excerpt("horovod_rank_crashed_process0-exit-137.log") if isinstance(e, LogEvent)]
    assert crash.kind == "process_failed" and crash.rank == 0
    # mpirun with the PID and node hidden: ``… process rank 1 with PID xxxxxx on node xxxxxxxx exited on signal 9``
    [died] = [e for e in read_excerpt("horovod_rank_crashed_mpirun-rank1-signal9.log") if isinstance(e, LogEvent)]
    assert died.rank == 1 and "host" not in died.details
    # pdsh's ``rdma-test-gpu-worker-1: …`` label before NCCL's unhandled CUDA error: that host
    events = [
        e for e in read_excerpt("llamafactory_rank_crashed_worker1-nccl-cuda-init-error.log") if isinstance(e, LogEvent)
    ]
    assert events and all(e.hostname == "rdma-test-gpu-worker-1" for e in events)
    # UCX's ``[610867610e4b:2498 :0:2599] Caught signal 7 (Bus error …)``: a container's id as the host
    [bus, *_] = [
        e for e in read_excerpt("megatron-deepspeed_rank_crashed_bus-error-nccl-barrier.log") if isinstance(e, LogEvent)
    ]
    assert bus.details.get("host") == "610867610e4b"
    # Open MPI's signal handler: ``[nelson-lab0:04968] Signal: Segmentation fault (11)``, its host known by its words
    [segv] = [
        e for e in read_excerpt("chainermn_rank_crashed-mpi-host-segfault-alltoall.log") if isinstance(e, LogEvent)
    ]
    assert segv.kind == "process_failed" and segv.details.get("host") == "nelson-lab0"
    assert nccl_host("[nmyjs-202-75:40360:0] Caught signal 11 (Segmentation fault: …)") == "nmyjs-202-75"
    assert nccl_host("[train.py:45] Signal: Segmentation fault (11)") is None  # a logger's file and line
    assert nccl_host("[worker:12] Signal handler installed") is None  # no handler's words after it


def test_yolov5_s_table_without_its_total_column_sums_box_obj_and_cls_and_a_nan_row_is_non_finite():
    # ``Epoch  gpu_mem  box  obj  cls  labels  img_size`` then ``1/99  2.64G  nan  nan  nan  4  416: 100%|…``
    [row] = reports("yolov5_nonfinite_loss_gpu-nan-from-epoch1.log")
    assert row.global_step == 1 and math.isnan(row.loss)
    [first, *_] = reports("yolov5_collective_timeout_val-bar-glued-broadcast-60s.log")
    assert first.global_step == 0 and round(first.loss, 5) == 0.10777  # 0.06442 + 0.02946 + 0.01389


def test_espnet_s_host_and_rank_prefix_is_cut_and_names_them():
    line = (
        "[node7:0/6] 2023-03-27 16:10:37,656 (trainer:663) WARNING: The grad norm is nan. Skipping updating the model."
    )
    task, cut = without_label(LogLine(line, "paste.log", 1))
    assert task == 0 and cut.host == "node7" and cut.text.startswith("2023-03-27 16:10:37,656 (trainer:663)")


def test_an_epoch_record_of_train_losses_and_their_test_twins_is_a_report_and_nolearn_s_table_is_read():
    # DETR's log.txt: ``{"train_lr": 1e-04, …, "train_loss": 25.99…, …, "test_loss": …, "n_parameters": 41302368}``
    read = reports("detr_healthy_detr-r50-log-json.log")
    assert len(read) == 13 and round(read[0].loss, 2) == 26.0  # (an epoch a line: no step said, the order its axis)
    # nolearn: ``Epoch  |  Train loss  |  Valid loss  |  Train / Val  |  Valid acc  |  Dur`` with ``nan`` cells
    nan = reports("lasagne_nonfinite_loss_nolearn-nan-from-epoch1.log")
    assert [r.global_step for r in nan[:2]] == [1, 2] and all(math.isnan(r.loss) for r in nan)


def test_a_rank_s_bare_float_under_srun_is_no_waveglow_line_and_a_glued_line_s_number_is_whole():
    task, cut = without_label(LogLine("3: 0.6931471805599453", "paste.log", 1))  # print(loss.item()) under srun -l
    assert task == 3 and cut.text == "0.6931471805599453"
    assert [m["num"] for m in PAIR.finditer("loss: 0.2445Epoch 1/1000")] == ["0.2445", "1"]  # a paste's glued line
    assert [m["num"] for m in PAIR.finditer("loss: 0.5x, eta 1d 06h")] == []  # a letter runs on: no number


def test_a_short_series_of_losses_about_zero_is_no_baseline_but_an_all_negative_one_is():
    about_zero, negative = RollingLosses(), RollingLosses()
    for value in (-0.01, -0.012, -0.009, 0.002):  # a policy-gradient objective changing sign
        about_zero.add(value)
    for value in (-5.4, -5.3, -5.5):  # a negative log-likelihood
        negative.add(value)
    assert not about_zero.leveled() and negative.leveled()


def test_an_objective_starting_at_exactly_zero_is_no_level_a_short_excerpt_s_rise_is_judged_from(tmp_path):
    # TRL's GRPO (open-r1, the corpus's train split): 'loss': 0.0, then 0.0002, then 0.0045 — its KL term growing
    # from 0, no spike; the same rise from a level is one
    assert "loss_spike" not in signals("trl_healthy_open-r1-grpo-accuracy-reward.log", tmp_path)
    for first, spike in ((0.0, False), (0.0001, True)):
        path = tmp_path / f"from-{first}.log"
        path.write_text("".join(f"{{'loss': {v}, 'epoch': {n / 10}}}\n" for n, v in enumerate((first, 0.0002, 0.0045))))
        assert ("loss_spike" in replayed_signals(path)) is spike, first
    grpo = RollingLosses()
    for value in (0.0, 0.0002):
        grpo.add(value)
    assert grpo.holds_zero()


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        # NCCL's own Cuda failure (an IPC handle's invalid argument), then its proxy closing connections: the GPU's
        ("megatron_rank-crashed_nccl-cuda-invalid-argument-tomte401.log", "rank_failure"),
        # a host's illegal memory access; the other host's socket reset by it (pasted before it)
        ("nccl-tests_rank-crashed_illegal-memory-access-conn-reset.log", "rank_failure"),
        # the program's ncclInvalidUsage, then the other ranks' bootstrap sockets broken
        ("lightning_rank_crashed-ddp-gpus-subset-nccl-invalid-usage.log", "rank_failure"),
        # an InfiniBand completion error first, then an illegal memory access: the link's fault stays first
        ("nccltests_network_error_2019-gdr-ib-error12-both-hosts.log", "network_failure"),
    ],
)
def test_a_crash_of_its_own_before_a_transport_error_of_its_process_is_the_cause(name, cause, tmp_path):
    path = tmp_path / "excerpt.log"
    path.write_bytes((TRAIN / name).read_bytes())
    diagnosis = replay_logs([str(path)], Settings()).result.diagnosis
    assert diagnosis.root_causes[0].cause == cause, diagnosis.to_dict()["root_causes"]
