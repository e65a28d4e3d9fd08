"""Shared test configuration: hypothesis settings profiles (style.md rule 19).

``HYPOTHESIS_PROFILE`` selects the profile: ``dev`` (the default) keeps the
suite fast, ``ci`` searches harder and derandomises so a red run reproduces.
"""

from __future__ import annotations

import os

from hypothesis import settings

# The real test registry's fixtures (registry.md §5), for every test that asks for one;
# each registry process starts only when a test first requests it. Every test runs beside an
# unrelated listener on SkyPilot's fixed ports 46580 and 50011 (issue 31: tests/support/heldports).
pytest_plugins = ["tests.support.registry.plugin", "tests.support.heldports"]

settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
