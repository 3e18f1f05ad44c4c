"""FLOPs per token counted from real modules, and peak FLOP/s matched on NVML names."""

from __future__ import annotations

import pytest

from trainpulse_otel.integrations.monitor.core import peak_from_env
from trainpulse_otel.mfu import (
    PEAK_TABLE,
    ModelShape,
    flops_per_token,
    match_gpu,
    model_shape,
    normalize_dtype,
    peak_flops,
    resolve_peak_flops,
)

torch = pytest.importorskip("torch")
nn = torch.nn


def test_numbers_alone_give_palm_formula():
    # 6N + 12·L·H·Dh·S, and half the attention term with a causal mask.
    n, layers, heads, dim, seq = 1_000_000, 4, 8, 64, 512
    full = flops_per_token(n_params=n, n_layers=layers, n_heads=heads, head_dim=dim, seq_len=seq)
    assert full == 6 * n + 12 * layers * heads * dim * seq
    causal = flops_per_token(n_params=n, n_layers=layers, n_heads=heads, head_dim=dim, seq_len=seq, causal=True)
    assert causal == 6 * n + 6 * layers * heads * dim * seq
    assert flops_per_token(n_params=n) == 6 * n  # no attention shape: parameter term only


def test_embedding_tables_are_left_out_but_a_tied_output_projection_counts():
    vocab, d = 100, 16

    class TinyLM(nn.Module):
        def __init__(self, tied: bool) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(32, d)
            self.mlp = nn.Linear(d, 4 * d)
            self.head = nn.Linear(d, vocab, bias=False)
            if tied:
                self.head.weight = self.tok.weight

    mlp = d * 4 * d + 4 * d
    assert model_shape(TinyLM(tied=False)).matmul_params == mlp + vocab * d
    assert model_shape(TinyLM(tied=True)).matmul_params == mlp + vocab * d  # counted once, via the head


def test_multihead_attention_modules_give_the_attention_width():
    d, heads, layers = 32, 4, 3
    layer = nn.TransformerEncoderLayer(d_model=d, nhead=heads, dim_feedforward=64, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    shape = model_shape(model)
    assert shape.attention_width == layers * d  # Σ H·Dh = L · d_model
    assert shape.matmul_params == sum(p.numel() for p in model.parameters())
    assert flops_per_token(model, seq_len=10) == 6 * shape.matmul_params + 12 * layers * d * 10


def test_hugging_face_llama_config_matches_an_independent_count():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg)
    d, kv = 64, 2 * (64 // 8)
    per_layer = d * d + 2 * d * kv + d * d + 3 * d * 176 + 2 * d  # q, k, v, o, SwiGLU MLP, two RMSNorms
    expected = 3 * per_layer + d + d * 1000  # + final norm + untied LM head
    shape = model_shape(model)
    assert shape.matmul_params == expected
    assert shape.attention_width == 3 * 8 * 8  # L · query heads · head_dim


def test_gpt2_small_shape_on_the_meta_device():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config())  # 124M, tied head
    total = sum(p.numel() for p in model.parameters())
    wpe = model.config.n_positions * model.config.n_embd
    assert model_shape(model).matmul_params == total - wpe  # the tied wte counts through lm_head
    assert model_shape(model).attention_width == 12 * 768


def test_given_numbers_override_the_module():
    model = nn.Linear(10, 10)
    assert model_shape(model, n_params=5).matmul_params == 5
    assert model_shape(model, n_layers=2, n_heads=4, head_dim=8).attention_width == 64


def test_flops_need_a_model_or_numbers():
    with pytest.raises(ValueError, match="model or n_params"):
        flops_per_token(seq_len=10)


@pytest.mark.parametrize(
    ("nvml_name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("Tesla V100-SXM2-32GB", "V100 SXM"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ],
)
def test_nvml_names_match_their_table_row(nvml_name, key):
    assert match_gpu(nvml_name) == key


def test_peaks_by_dtype():
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989e12
    assert peak_flops("NVIDIA H100 80GB HBM3", torch.float8_e4m3fn) == 1979e12
    assert peak_flops("NVIDIA A100-SXM4-40GB", torch.bfloat16) == 312e12
    assert peak_flops("NVIDIA A100-SXM4-40GB", "32-true") == 19.5e12
    assert peak_flops("Tesla V100-SXM2-16GB", "bf16") is None  # Volta has no bf16
    assert peak_flops("Some Future GPU", "bf16") is None
    assert peak_flops(None) is None


def test_every_table_row_is_dense_and_ordered_by_precision():
    for key, _, peaks in PEAK_TABLE:
        if "fp8" in peaks and "bf16" in peaks:
            assert peaks["fp8"] == pytest.approx(2 * peaks["bf16"], rel=0.03), key
        if "bf16" in peaks and "tf32" in peaks:
            assert peaks["tf32"] == pytest.approx(peaks["bf16"] / 2, rel=0.03)  # datasheets round, key


def test_an_override_wins_over_the_table():
    name = "NVIDIA H100 80GB HBM3"
    assert resolve_peak_flops(name, "bf16", override=1e15) == 1e15
    assert resolve_peak_flops(name, "bf16") == 989e12
    with pytest.raises(ValueError, match="peak_flops"):
        resolve_peak_flops(name, "bf16", override=-1)


def test_the_monitor_reads_the_peak_from_its_environment_and_ignores_a_bad_one(caplog):
    assert peak_from_env({"TRAINPULSE_PEAK_FLOPS": "5e14"}) == 5e14
    assert peak_from_env({}) is None
    assert peak_from_env({"TRAINPULSE_PEAK_FLOPS": "lots"}) is None
    assert "ignoring TRAINPULSE_PEAK_FLOPS" in caplog.text


def test_dtype_spellings():
    assert normalize_dtype(torch.bfloat16) == "bf16"
    assert normalize_dtype("bf16-mixed") == "bf16"
    assert normalize_dtype("16-mixed") == "fp16"
    assert normalize_dtype("float8_e5m2") == "fp8"
    assert normalize_dtype("int8") is None


def test_shape_without_sequence_length_drops_the_attention_term():
    assert ModelShape(10, 64).flops_per_token(None) == 60
