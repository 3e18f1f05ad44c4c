"""Test doubles for hardware TrainPulse cannot assume: NVML, nvidia-smi."""
