"""A real Hugging Face Trainer run on a tiny random GPT-2, reporting to a real daemon over HTTP."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainpulse_otel.integrations.huggingface import TrainPulseCallback  # noqa: E402 - after the importorskip guard

VOCAB, MAX_LEN = 96, 32


class PaddedTokens(torch.utils.data.Dataset):
    """Random token sequences of varied real length, padded to MAX_LEN with a mask."""

    def __init__(self, n: int) -> None:
        gen = torch.Generator().manual_seed(0)
        self.lengths = torch.randint(8, MAX_LEN + 1, (n,), generator=gen).tolist()
        self.ids = torch.randint(1, VOCAB, (n, MAX_LEN), generator=gen)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> dict:
        mask = (torch.arange(MAX_LEN) < self.lengths[i]).long()
        ids = self.ids[i] * mask
        return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def tiny_trainer(tmp_path, callback: TrainPulseCallback, steps: int = 12) -> transformers.Trainer:
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=MAX_LEN, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        logging_steps=4,
        save_strategy="steps",
        save_steps=6,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    return transformers.Trainer(
        model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=PaddedTokens(128), callbacks=[callback]
    )


@pytest.mark.e2e
def test_trainer_run_reaches_the_daemon_snapshot(tmp_path, served):
    dataset_lengths = PaddedTokens(128).lengths
    callback = TrainPulseCallback(model_name="tiny-gpt2", endpoint=served.url, interval=0.05, peak_flops=1e12)
    tiny_trainer(tmp_path, callback).train()

    monitor = callback.monitor
    assert monitor is not None
    assert monitor.stats["sent"] >= 1 and monitor.stats["dropped"] == 0 and monitor.stats["rejected"] == 0
    assert monitor.stats["steps"] == 12

    served.engine.tick()  # what the daemon's loop does every interval
    status, snapshot = served.get_json("/v1/snapshot")
    assert status == 200
    training = snapshot["training"]
    assert training["model_name"] == "tiny-gpt2" and training["framework"] == "huggingface"
    assert training["global_step"] == 12
    assert training["world_size"] == 1 and training["micro_batch_size"] == 4
    assert training["gradient_accumulation_steps"] == 2 and training["global_batch_size"] == 8
    assert training["step_time_ms"] > 0 and training["tokens_per_sec"] > 0 and training["samples_per_sec"] > 0
    # Real lengths come from the attention masks, padded to the batch's 32 columns.
    assert training["max_seq_len"] == MAX_LEN
    assert min(dataset_lengths) <= training["avg_seq_len"] < MAX_LEN
    assert 0 < training["mfu"] < 1 and training["tflops"] > 0
    assert training["loss"] > 0 and training["learning_rate"] >= 0
    assert "data_wait_ms" in training and "checkpoint_ms" in training  # saves every 6 steps
    print(training)


def test_callback_reads_job_fields_from_training_arguments(tmp_path):
    callback = TrainPulseCallback(model_name="tiny-gpt2", interval=60, hardware="none", flops_per_token=1e6)
    trainer = tiny_trainer(tmp_path, callback, steps=4)
    trainer.train()
    sample = callback.monitor.drain() or callback.monitor._destination.engine.frame.training
    assert sample.framework == "huggingface"
    assert sample.global_batch_size == 8 and sample.micro_batch_size == 4
    assert sample.tflops is not None and sample.mfu is None  # no GPU, no peak: TFLOP/s but no MFU
