"""Framework integrations: plain PyTorch loops, Hugging Face Trainer, Lightning.

Each module imports its framework only when it is imported itself; nothing
here is loaded by ``import trainpulse_otel``.
"""
