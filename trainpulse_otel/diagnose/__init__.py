"""Diagnosis: the pure stage — window, detectors, correlation, health, root causes."""
