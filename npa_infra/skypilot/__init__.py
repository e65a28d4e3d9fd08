"""The SkyPilot adapter: the only code that runs ``sky``.

It resolves the pinned binary, isolates SkyPilot's state per stack, runs the
CLI through an injected runner, and turns every answer into typed results and
typed errors (skypilot-0.12.md). npa never imports ``sky`` itself.
"""
