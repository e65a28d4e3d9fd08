"""Preflight checks that run before anything costs cluster time.

``targets`` decides, purely, which images a spec can run: every state
reachable through control flow (all branches of every decision, every loop,
sequence and parallel member), each resolved by the renderer's own selection
rules. ``images`` checks each distinct image once, concurrently, through a
``npa_infra.registry.base.Registry`` and returns the report that
``preflight-images`` prints and ``submit`` gates on.
"""
