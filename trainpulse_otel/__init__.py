"""TrainPulse: OpenTelemetry-native predictive diagnostics for AI and LLM training jobs."""

__version__ = "0.1.0"
