"""Orchestration of the spec commands and live runs, split by job.

Layers, top to bottom (import-linter holds them, ``pyproject.toml``):
``operations`` | ``submission`` → ``supervision`` → ``execution`` | ``planning``
→ ``target``. The decisions themselves are pure functions in the core
(``npa_infra.runs``, ``plan``, ``render``); the modules here execute and record them.
"""
