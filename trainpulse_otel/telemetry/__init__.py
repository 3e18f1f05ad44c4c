"""Telemetry: OTel instruments over the latest samples, providers, and the in-process reader."""
