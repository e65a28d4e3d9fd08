"""Preflight checks that run before anything costs cluster time.

Image preflight against registries, cluster readiness and GPU-shape checks
live here; they orchestrate the adapters and feed ``submit``.
"""
