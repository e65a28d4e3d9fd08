"""Jittered exponential backoff (runtime-reference.md §1 Constants)."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from npa_infra.runs import backoff


def test_backoff_constants_match_reference() -> None:
    assert (backoff.RECOVERY_DEADLINE, backoff.BASE, backoff.CAP, backoff.JITTER) == (
        180.0,
        2.0,
        20.0,
        0.2,
    )
    assert backoff.REQUEST_POLL == 2.0


@pytest.mark.parametrize(
    ("retry", "r", "expected"),
    [
        (1, 0.5, 2.0),
        (1, 0.0, 1.6),
        (1, 1.0, 2.4),
        (2, 0.5, 4.0),
        (3, 0.5, 8.0),
        (4, 0.5, 16.0),
        (5, 0.5, 20.0),
        (5, 1.0, 20.0),
        (5, 0.0, 16.0),
        (40, 0.5, 20.0),
        (10**9, 0.5, 20.0),
        (0, 0.5, 2.0),
        (-3, 0.5, 2.0),
        (1, -7.0, 1.6),
        (1, 9.0, 2.4),
        (1, math.nan, 2.0),
        (1, math.inf, 2.4),
    ],
    ids=[
        "first-no-jitter",
        "first-low",
        "first-high",
        "second",
        "third",
        "fourth",
        "fifth-capped",
        "capped-high-clamped",
        "capped-low",
        "far",
        "huge-retry",
        "zero-retry-as-first",
        "negative-retry-as-first",
        "r-below-clamped",
        "r-above-clamped",
        "r-nan-neutral",
        "r-inf-clamped",
    ],
)
def test_delay_retry_and_jitter_expected_seconds(retry: int, r: float, expected: float) -> None:
    assert backoff.delay(retry, r) == pytest.approx(expected)


@given(retry=st.integers(min_value=-10, max_value=10_000), r=st.floats(allow_nan=True))
@example(retry=1, r=0.0)
def test_delay_any_input_within_zero_and_cap(retry: int, r: float) -> None:
    assert 0.0 <= backoff.delay(retry, r) <= backoff.CAP


@given(retry=st.integers(min_value=1, max_value=64), r=st.floats(min_value=0.0, max_value=1.0))
def test_delay_retry_n_within_jitter_band(retry: int, r: float) -> None:
    nominal = min(backoff.CAP, backoff.BASE * 2.0 ** (retry - 1))
    low = nominal * (1 - backoff.JITTER)
    high = min(backoff.CAP, nominal * (1 + backoff.JITTER))
    assert low - 1e-9 <= backoff.delay(retry, r) <= high + 1e-9


@given(retry=st.integers(min_value=1, max_value=64), r=st.floats(min_value=0.0, max_value=1.0))
def test_delay_same_draw_monotone_in_retry(retry: int, r: float) -> None:
    assert backoff.delay(retry, r) <= backoff.delay(retry + 1, r) + 1e-9


@given(retry=st.integers(min_value=1, max_value=64), r=st.floats(min_value=0.0, max_value=1.0))
def test_delay_same_input_deterministic(retry: int, r: float) -> None:
    assert backoff.delay(retry, r) == backoff.delay(retry, r)
