"""The launch transaction's timing constants and its jittered exponential backoff.

runtime-reference.md §1 Constants: retry n waits
``min(20, 2·2ⁿ⁻¹)·(1+(2r−1)·0.2)``, with r clamped to [0, 1] and the result
clamped to [0, 20], inside a 180 s recovery deadline. The jitter ``r`` is a
parameter, never drawn here, so the core stays deterministic.
"""

from __future__ import annotations

import math

__all__ = ["BASE", "CAP", "JITTER", "RECOVERY_DEADLINE", "REQUEST_POLL", "delay"]

RECOVERY_DEADLINE = 180.0  # seconds a transaction may spend recovering from transient failures
BASE = 2.0  # the first retry's nominal wait
CAP = 20.0  # no wait is longer than this
JITTER = 0.2  # ± fraction of the nominal wait
REQUEST_POLL = 2.0  # wait between two reads of an in-flight launch request

_MAX_DOUBLINGS = 16  # 2·2¹⁶ is far above CAP; bounds the power for huge retry numbers


def delay(retry: int, r: float) -> float:
    """Seconds to wait before retry ``retry`` (1-based) with jitter draw ``r`` in [0, 1].

    A ``retry`` below 1 is treated as 1 and a NaN ``r`` as 0.5 (no jitter), so
    the function is total.
    """
    doublings = min(max(retry, 1) - 1, _MAX_DOUBLINGS)
    nominal = min(CAP, BASE * 2.0**doublings)
    clamped = 0.5 if math.isnan(r) else min(1.0, max(0.0, r))
    return min(CAP, max(0.0, nominal * (1.0 + (2.0 * clamped - 1.0) * JITTER)))
