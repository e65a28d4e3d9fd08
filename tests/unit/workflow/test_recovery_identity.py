"""The relaunch gate's identity check (issue 9): the wave's identity is recomputed from the
current inputs and compared with the attempt's recorded digest, never copied from it."""

from __future__ import annotations

import pytest

from npa_infra.workflow.execution import recovery

A = "a" * 64
B = "b" * 64


@pytest.mark.parametrize(
    ("expected", "current", "ok", "indeterminate"),
    [
        pytest.param(A, A, True, False, id="unchanged"),
        pytest.param(A, B, False, False, id="drifted-blocks"),
        pytest.param(A, None, False, True, id="cannot-recompute-is-indeterminate"),
        pytest.param(None, A, False, True, id="no-recorded-digest-is-indeterminate"),
    ],
)
def test_identity_unchanged_compares_a_fresh_recomputation(
    expected: str | None, current: str | None, ok: bool, indeterminate: bool
) -> None:
    calls: list[int] = []

    def recompute() -> str | None:
        calls.append(1)
        return current

    check = recovery.identity_unchanged(expected, recompute)

    assert (check.ok, check.indeterminate) == (ok, indeterminate)
    assert calls == [1]  # recomputed every time, from the current inputs
    if not ok and not indeterminate:
        assert "drifted" in check.reason and A[:12] in check.reason and B[:12] in check.reason
