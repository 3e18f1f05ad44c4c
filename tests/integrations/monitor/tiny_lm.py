"""A tiny PyTorch language model and its batches, trained on the CPU by the monitor's real-loop tests."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")


nn = torch.nn

VOCAB, D, HEADS, LAYERS, SEQ, BATCH = 64, 32, 4, 2, 32, 8


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        layer = nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=64, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, input_ids, attention_mask):
        hidden = self.blocks(self.embed(input_ids), src_key_padding_mask=attention_mask == 0)
        return self.head(hidden)


def batches(n: int, delay_s: float = 0.0):
    """Batches made up front, so the loader itself costs nothing unless ``delay_s`` slows it down."""
    gen = torch.Generator().manual_seed(1)
    made = []
    for _ in range(n):
        lengths = torch.randint(SEQ // 2, SEQ + 1, (BATCH,), generator=gen)
        mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
        made.append({"input_ids": torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen) * mask, "attention_mask": mask})
    for batch in made:
        time.sleep(delay_s)  # a slow data loader when delay_s > 0
        yield batch
