"""A real Lightning Trainer run on the CPU with the callback, reporting to a real daemon."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pl = pytest.importorskip("lightning.pytorch")

from trainpulse_otel.integrations.lightning import TrainPulseCallback  # noqa: E402 - after the importorskip guard

VOCAB, SEQ, BATCH = 50, 16, 4


class TokenModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 16)
        self.head = torch.nn.Linear(16, VOCAB)

    def training_step(self, batch, batch_idx):
        logits = self.head(self.embed(batch["input_ids"]))
        return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch["input_ids"].reshape(-1))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader() -> torch.utils.data.DataLoader:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (64, SEQ), generator=gen)
    lengths = torch.randint(4, SEQ + 1, (64,), generator=gen)
    mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
    rows = [{"input_ids": i * m, "attention_mask": m} for i, m in zip(ids, mask, strict=True)]
    return torch.utils.data.DataLoader(rows, batch_size=BATCH)


@pytest.mark.e2e
def test_lightning_run_reaches_the_daemon(tmp_path, served):
    callback = TrainPulseCallback(model_name="tiny-pl", endpoint=served.url, interval=0.05)
    checkpoints = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=3, save_top_k=-1)
    trainer = pl.Trainer(
        max_steps=6,
        accumulate_grad_batches=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback, checkpoints],
        default_root_dir=tmp_path,
    )
    trainer.fit(TokenModel(), loader())

    assert callback.monitor.stats["steps"] == 6  # optimizer steps: 12 micro-batches / 2
    assert callback.monitor.stats["sent"] >= 1 and callback.monitor.stats["dropped"] == 0
    served.engine.tick()
    _, snapshot = served.get_json("/v1/snapshot")
    training = snapshot["training"]
    assert training["framework"] == "lightning" and training["model_name"] == "tiny-pl"
    assert training["global_step"] == 6 and training["gradient_accumulation_steps"] == 2
    assert training["precision"] == "32-true"
    assert training["samples_per_sec"] > 0 and training["tokens_per_sec"] > 0
    assert training["max_seq_len"] == SEQ and 4 <= training["avg_seq_len"] < SEQ
    assert training["loss"] > 0 and training["tflops"] > 0
    assert "data_wait_ms" in training and "checkpoint_ms" in training
