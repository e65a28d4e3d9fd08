"""``FakeRegistry``: a stateful ``registry.base.Registry`` for tests of preflight and submit.

Answers come from ``answers`` (image text → ``ManifestCheck``); any other
image is ``ok`` with a digest derived from its text, so runs are
deterministic. ``delay`` adds latency per check (concurrency tests); every
checked reference is recorded in ``calls``, thread-safely.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping

from npa_infra.registry.models import CheckStatus, ImageRef, ManifestCheck, Platform

__all__ = ["FakeRegistry", "fake_digest"]


def fake_digest(text: str) -> str:
    """The digest ``FakeRegistry`` reports for an image it has no answer for."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class FakeRegistry:
    def __init__(
        self, answers: Mapping[str, ManifestCheck] | None = None, *, delay: float = 0.0
    ) -> None:
        self.answers = dict(answers or {})
        self.delay = delay
        self.calls: list[str] = []
        self.platforms: list[Platform] = []
        self.closed = False
        self._lock = threading.Lock()

    def check_manifest(self, ref: ImageRef, platform: Platform) -> ManifestCheck:
        with self._lock:
            self.calls.append(ref.text)
            self.platforms.append(platform)
        if self.delay:
            time.sleep(self.delay)
        answer = self.answers.get(ref.text)
        if answer is not None:
            return answer
        return ManifestCheck(
            CheckStatus.OK,
            "single-platform manifest",
            http_status=200,
            digest=ref.digest or fake_digest(ref.text),
        )

    def close(self) -> None:
        self.closed = True
