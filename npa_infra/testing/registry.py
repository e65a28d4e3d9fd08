"""``FakeRegistry``: a stateful ``registry.base.Registry`` for tests of preflight and submit.

Answers come from ``answers`` (image text → ``ManifestCheck``); any other
image is ``ok`` with a digest derived from its text, so runs are
deterministic. ``delay`` adds latency per check (concurrency tests); every
checked reference is recorded in ``calls``, thread-safely.

``image_labels`` answers from ``labels`` (image text → a label mapping, or a
``LabelsResult`` such as a failure); any other image carries the bootstrap
contract label, like a well-built project image. Every reference asked for
its labels is recorded in ``label_calls``. Like the real client, asking for
the labels of a check that is not ``ok`` raises ``InvariantError``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping

from npa_infra.errors import InvariantError
from npa_infra.registry import contract
from npa_infra.registry.contract import LabelsResult
from npa_infra.registry.models import CheckStatus, ImageRef, ManifestCheck, Platform

__all__ = ["FakeRegistry", "fake_digest"]


def fake_digest(text: str) -> str:
    """The digest ``FakeRegistry`` reports for an image it has no answer for."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class FakeRegistry:
    def __init__(
        self,
        answers: Mapping[str, ManifestCheck] | None = None,
        *,
        labels: Mapping[str, Mapping[str, str] | LabelsResult] | None = None,
        delay: float = 0.0,
    ) -> None:
        self.answers = dict(answers or {})
        self.labels = dict(labels or {})
        self.delay = delay
        self.calls: list[str] = []
        self.platforms: list[Platform] = []
        self.label_calls: list[str] = []
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

    def image_labels(self, ref: ImageRef, check: ManifestCheck) -> LabelsResult:
        if check.status is not CheckStatus.OK or not (check.platform_digest or check.digest):
            raise InvariantError(f"image_labels needs an ok manifest check, got {check.status}")
        with self._lock:
            self.label_calls.append(ref.text)
        answer = self.labels.get(ref.text, {contract.LABEL: contract.CONTRACT})
        if isinstance(answer, LabelsResult):
            return answer
        return LabelsResult(labels=dict(answer), config_digest=fake_digest(f"config {ref.text}"))

    def close(self) -> None:
        self.closed = True
