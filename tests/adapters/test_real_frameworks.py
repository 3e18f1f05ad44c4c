"""The adapters against what the installed frameworks really emit (CPU), sent over real HTTP.

Hugging Face's Trainer, Lightning's ThroughputMonitor (Trainer callback and the
Fabric ``Throughput`` utility) and PyTorch DDP's logging data are produced by
the real libraries here; DeepSpeed, Megatron-LM and torchtitan need GPUs to
run, so their output is covered by the recorded fixtures instead.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

#: Real PyTorch, imported by each test (not at collection: the quick tier collects this module and leaves it out).
pytestmark = [
    pytest.mark.jobs,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"),
]

JSON = {"Content-Type": "application/json"}


def post(served, name: str, payload: dict, query: str = "") -> tuple[int, dict]:
    status, _, raw = served.send("POST", f"/v1/framework?name={name}{query}", json.dumps(payload).encode(), JSON)
    return status, json.loads(raw)


# ---------------------------------------------------------------- Hugging Face


def _hf_run(tmp_path):
    import torch

    transformers = pytest.importorskip("transformers")

    class Recorder(transformers.TrainerCallback):
        def __init__(self) -> None:
            self.logs: list[dict] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logs.append({"logs": dict(logs or {}), "step": state.global_step})

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n: int) -> None:
            self.ids = torch.randint(1, 64, (n, 16), generator=torch.Generator().manual_seed(0))

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16)
    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=8,
        per_device_train_batch_size=4,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=4,
        per_device_eval_batch_size=4,
        include_num_input_tokens_seen=True,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    recorder = Recorder()
    trainer = transformers.Trainer(
        model=transformers.GPT2LMHeadModel(config),
        args=args,
        train_dataset=Tokens(64),
        eval_dataset=Tokens(8),
        callbacks=[recorder],
    )
    trainer.train()
    return recorder.logs, trainer.state


@pytest.mark.e2e
def test_real_trainer_logs(served, tmp_path):
    logs, state = _hf_run(tmp_path)
    training = [entry for entry in logs if "loss" in entry["logs"]]
    evaluation = [entry for entry in logs if "eval_loss" in entry["logs"]]
    end = [entry for entry in logs if "train_runtime" in entry["logs"] and "train_loss" in entry["logs"]]
    assert len(training) == 4 and len(evaluation) == 2 and len(end) == 1

    for entry in training:
        status, answer = post(served, "huggingface", entry)
        assert status == 202, answer
        sample, raw = answer["sample"], entry["logs"]
        assert sample["global_step"] == entry["step"] and sample["loss"] == raw["loss"]
        assert (
            sample["grad_norm"] == pytest.approx(raw["grad_norm"]) and sample["learning_rate"] == raw["learning_rate"]
        )
        assert sample["tokens_per_sec"] == pytest.approx(raw["train_tokens_per_second"])
        assert "num_input_tokens_seen" in answer["ignored"] and "epoch" in answer["ignored"]

    for entry in evaluation:
        status, answer = post(served, "huggingface", entry)
        assert status == 400 and "eval_loss" in answer["error"]

    status, answer = post(served, "huggingface", end[0])
    assert status == 202, answer
    assert answer["sample"]["step_time_ms"] == pytest.approx(1000 / end[0]["logs"]["train_steps_per_second"])
    assert answer["sample"]["samples_per_sec"] == end[0]["logs"]["train_samples_per_second"]

    state_body = {"log_history": state.log_history, "global_step": state.global_step}
    status, answer = post(served, "huggingface", state_body)
    assert status == 202 and answer["sample"]["global_step"] == 8


# ------------------------------------------------------------------- Lightning


def test_real_fabric_throughput_keys(served):
    throughput_module = pytest.importorskip("lightning.fabric.utilities.throughput")
    peak = 312e12
    for world_size in (1, 4):
        meter = throughput_module.Throughput(available_flops=peak, world_size=world_size, window_size=3)
        for i in range(1, 5):  # 0.5 s per batch of 8 samples of 2048 tokens, 4e13 FLOPs per batch per device
            meter.update(time=0.5 * i, batches=i, samples=8 * i, lengths=8 * 2048 * i, flops=4e13)
        metrics = meter.compute()
        status, answer = post(served, "lightning", {**metrics, "step": 4})
        assert status == 202, answer
        sample = answer["sample"]
        assert sample["world_size"] == world_size  # inferred from which keys Lightning emitted
        assert sample["step_time_ms"] == pytest.approx(500.0)
        assert sample["samples_per_sec"] == pytest.approx(16.0 * world_size)
        assert sample["tokens_per_sec"] == pytest.approx(16.0 * 2048 * world_size)
        assert sample["mfu"] == pytest.approx(metrics["device/mfu"]) and 0 < sample["mfu"] < 1
        assert sample["tflops"] == pytest.approx(metrics["device/flops_per_sec"] / 1e12)


def _lightning_run(tmp_path) -> list[tuple[int, dict]]:
    import torch

    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.callbacks import LearningRateMonitor, ThroughputMonitor
    from lightning.pytorch.loggers import Logger

    class Recording(Logger):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[int, dict]] = []

        @property
        def name(self) -> str:
            return "recording"

        @property
        def version(self) -> int:
            return 0

        def log_hyperparams(self, params, *args, **kwargs) -> None:
            pass

        def log_metrics(self, metrics, step=None) -> None:
            self.rows.append((step, dict(metrics)))

    class Tiny(pl.LightningModule):
        flops_per_batch = 2 * 8 * 32 * 32 * 3

        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(32, 32)

        def training_step(self, batch, batch_idx):
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    logger = Recording()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 32)), batch_size=8)
    trainer = pl.Trainer(
        max_steps=8,
        accelerator="cpu",
        devices=1,
        logger=logger,
        log_every_n_steps=1,
        default_root_dir=str(tmp_path),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[
            ThroughputMonitor(batch_size_fn=lambda batch: batch[0].size(0), window_size=3),
            LearningRateMonitor(logging_interval="step"),
        ],
    )
    trainer.fit(Tiny(), data)
    return logger.rows


def test_real_lightning_trainer_throughput_monitor(served, tmp_path):
    rows = _lightning_run(tmp_path)
    with_rates = [(step, m) for step, m in rows if "train/device/batches_per_sec" in m]
    assert with_rates, rows
    step, metrics = with_rates[-1]
    status, answer = post(served, "lightning", {**metrics, "step": step})
    assert status == 202, answer
    sample = answer["sample"]
    assert sample["world_size"] == 1 and sample["global_step"] == step
    assert sample["step_time_ms"] == pytest.approx(1000 / metrics["train/device/batches_per_sec"])
    assert sample["samples_per_sec"] == pytest.approx(metrics["train/device/samples_per_sec"])
    assert sample["tflops"] == pytest.approx(metrics["train/device/flops_per_sec"] / 1e12)
    lr_rows = [m for _, m in rows if "lr-AdamW" in m]
    loss_rows = [m for _, m in rows if "train_loss" in m]
    status, answer = post(served, "lightning", {**lr_rows[-1], **loss_rows[-1], "step": step})
    assert status == 202 and answer["sample"]["learning_rate"] == pytest.approx(1e-3)
    assert answer["sample"]["loss"] == pytest.approx(loss_rows[-1]["train_loss"])


# --------------------------------------------------------------------- PyTorch

# The child leaves by os._exit once its process group is destroyed: gloo's worker threads can abort the interpreter's
# finalization (SIGABRT, pytorch/pytorch#179291), after the data this test reads was printed.
DDP_SCRIPT = """
import json, os, sys, torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(11):
    model(torch.randn(16, 64)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
data = model._get_ddp_logging_data()
print(json.dumps({k: v for k, v in data.items() if isinstance(v, (int, float, str))}), flush=True)
dist.destroy_process_group()
os._exit(0)
"""


def test_real_ddp_logging_data(served, tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", DDP_SCRIPT, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    status, answer = post(served, "pytorch", data)
    assert status == 202, answer
    (rank,) = answer["sample"]["ranks"]
    assert rank["rank"] == 0 and answer["sample"]["world_size"] == 1
    expected_ms = (data["avg_forward_compute_time"] + data["avg_backward_compute_time"]) / 1e6  # DDP reports ns
    assert rank["step_time_ms"] == pytest.approx(expected_ms) and 0 < rank["step_time_ms"] < 10_000
    exposed = max(data["avg_backward_comm_time"] - data["avg_backward_compute_comm_overlap_time"], 0) / 1e6
    assert rank["all_reduce_wait_ms"] == pytest.approx(exposed)
