"""The table of external mutations (runs.mutations) is held to the code and the tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from npa_infra.runs.mutations import BOUNDARIES, Boundary, Mutation, gaps

ROOT = Path(__file__).resolve().parents[3]
SOURCE = "\n".join(
    p.read_text(encoding="utf-8")
    for package in ("npa_infra", "preflight")
    for p in (ROOT / package).rglob("*.py")
)


def test_every_mutation_has_exactly_one_boundary() -> None:
    assert sorted(b.mutation for b in BOUNDARIES) == sorted(Mutation)


@pytest.mark.parametrize(
    "boundary", [b for b in BOUNDARIES if b.intent], ids=lambda b: b.mutation.name
)
def test_boundary_records_are_written_by_the_code(boundary: Boundary) -> None:
    for name in (boundary.intent, boundary.outcome):
        assert name is not None
        # a journal event kind or record key is written as a string literal or a field name
        pattern = rf"[\"']{re.escape(name)}[\"']|\b{re.escape(name)}\s*[:=(]"
        assert re.search(pattern, SOURCE), name


@pytest.mark.parametrize(
    "boundary", [b for b in BOUNDARIES if b.crash_test], ids=lambda b: b.mutation.name
)
def test_boundary_crash_test_exists(boundary: Boundary) -> None:
    assert boundary.crash_test is not None
    path, _, name = boundary.crash_test.partition("::")
    text = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {re.escape(name)}\(", text, re.MULTILINE), boundary.crash_test


def test_every_mutation_journals_intent_and_outcome_and_has_a_crash_test() -> None:
    """A new mutation without its records or its crash test must show up here."""
    assert gaps() == ()
