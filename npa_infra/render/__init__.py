"""Rendering plans to SkyPilot 0.12 task YAML."""
