"""Telemetry: OTel instruments over the latest samples, providers, exporters, and the frame read back."""
