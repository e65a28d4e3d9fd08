"""The resume's decision about an earlier submit's launch child (runs.children)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs.children import ChildAction, ChildIdentity, ChildState, decide

LIMIT = 1800.0


@pytest.mark.parametrize(
    ("state", "waited", "action"),
    [
        (ChildState.NOT_RECORDED, 0.0, ChildAction.PROCEED),
        (ChildState.GONE, 0.0, ChildAction.PROCEED),
        (ChildState.GONE, LIMIT * 2, ChildAction.PROCEED),
        (ChildState.ALIVE, 0.0, ChildAction.WAIT),
        (ChildState.ALIVE, LIMIT - 1, ChildAction.WAIT),
        (ChildState.ALIVE, LIMIT, ChildAction.BLOCK),
        (ChildState.UNKNOWN, 0.0, ChildAction.BLOCK),
    ],
    ids=[
        "unrecorded",
        "gone",
        "gone-late",
        "alive",
        "alive-near-limit",
        "alive-at-limit",
        "unknown",
    ],
)
def test_decide_child_state_gives_action(
    state: ChildState, waited: float, action: ChildAction
) -> None:
    assert decide(state, waited=waited, limit=LIMIT).action is action


@given(
    state=st.sampled_from(ChildState),
    waited=st.floats(min_value=0, max_value=10_000, allow_nan=False),
    limit=st.floats(min_value=0, max_value=10_000, allow_nan=False),
)
def test_decide_never_proceeds_while_the_child_may_act(
    state: ChildState, waited: float, limit: float
) -> None:
    decision = decide(state, waited=waited, limit=limit)
    may_act = state in (ChildState.ALIVE, ChildState.UNKNOWN)
    assert (decision.action is ChildAction.PROCEED) is not may_act
    assert decision.reason


@given(
    pid=st.integers(min_value=1, max_value=2**22),
    ticks=st.integers(min_value=0, max_value=2**40),
    boot=st.text(max_size=40),
    host=st.text(max_size=40),
)
def test_child_identity_round_trips_through_json(
    pid: int, ticks: int, boot: str, host: str
) -> None:
    child = ChildIdentity(pid, ticks, boot, host)
    assert ChildIdentity.from_json(child.to_json()) == child


@pytest.mark.parametrize(
    "raw", [None, {}, {"pid": "12"}, [], "pid"], ids=["none", "empty", "str-pid", "list", "str"]
)
def test_child_identity_from_malformed_json_is_none(raw: object) -> None:
    assert ChildIdentity.from_json(raw) is None
