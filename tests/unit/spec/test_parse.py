"""``npa_infra.spec.parse.Collector``: each problem once, found by lookup (issue 19).

Phases report through ``error`` and also append to ``issues`` directly; a rule
reached twice is reported once either way. The tests count how often earlier
issues are read, never time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import SupportsIndex, overload

from npa_infra.spec.issues import SpecIssue
from npa_infra.spec.parse import Collector
from npa_infra.spec.source import SourceMap


class _CountedIssues(list[SpecIssue]):
    """A list of issues that counts how many of its items are read."""

    reads = 0

    def __iter__(self) -> Iterator[SpecIssue]:
        for item in super().__iter__():
            self.reads += 1
            yield item

    @overload
    def __getitem__(self, index: SupportsIndex) -> SpecIssue: ...
    @overload
    def __getitem__(self, index: slice) -> list[SpecIssue]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> SpecIssue | list[SpecIssue]:
        self.reads += 1
        return super().__getitem__(index)


def test_collector_error_same_path_and_message_reported_once() -> None:
    c = Collector(SourceMap())
    c.error(("states", "a"), "bad", "fix it")
    c.error(("states", "a"), "bad", "another hint")
    c.error(("states", "a"), "worse")
    c.error(("states", "b"), "bad")
    assert [(i.path, i.message) for i in c.issues] == [
        ("$.states.a", "bad"),
        ("$.states.a", "worse"),
        ("$.states.b", "bad"),
    ]


def test_collector_error_after_direct_append_of_same_issue_is_not_repeated() -> None:
    c = Collector(SourceMap())
    c.error(("states", "a"), "first")
    c.issues.append(SpecIssue("$.states.b", "appended by a phase"))
    c.error(("states", "b"), "appended by a phase")
    c.error(("states", "c"), "appended by a phase")
    assert [(i.path, i.message) for i in c.issues] == [
        ("$.states.a", "first"),
        ("$.states.b", "appended by a phase"),
        ("$.states.c", "appended by a phase"),
    ]


def test_collector_error_after_issues_replaced_checks_the_new_list() -> None:
    c = Collector(SourceMap())
    c.error(("states", "a"), "bad")
    c.issues = [SpecIssue("$.states.b", "bad")]
    c.error(("states", "a"), "bad")
    c.error(("states", "b"), "bad")
    assert [(i.path, i.message) for i in c.issues] == [("$.states.b", "bad"), ("$.states.a", "bad")]


def test_collector_error_reads_each_earlier_issue_once_not_once_per_error() -> None:
    issues = _CountedIssues()
    c = Collector(SourceMap(), issues=issues)
    for i in range(2_000):
        c.error(("states", f"s{i}"), "token {{config.nope}}: config has no key 'nope'")
    assert len(c.issues) == 2_000
    assert issues.reads <= 2_000  # a scan per error read about 2,000,000
