"""One pass reports every problem at its line (issue 18).

A generated valid spec (``tests/strategies.valid_spec_texts``) gets one or
more injected defects, each naming the line a person would fix; one
``load_validated`` must report every one of them there, each once, with the
others. Table tests pin each new rule and the SkyPilot-shaped resource rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.catalog.builtin import BUILTIN
from npa_infra.errors import SpecError
from npa_infra.spec import resources
from npa_infra.spec.issues import SpecIssue
from npa_infra.workflow.planning.loading import load_validated
from tests.strategies import valid_spec_texts


@dataclass(frozen=True)
class Defect:
    name: str
    inject: Callable[[dict[str, Any]], None]
    # (json path, anchor line text, text on the expected line, message part)
    expect: tuple[tuple[str, str, str, str], ...]
    warning: bool = False
    # applied to the dumped text: what a mapping cannot hold (a key written twice)
    post: Callable[[str], str] | None = None


def _state(name: str, body: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def inject(data: dict[str, Any]) -> None:
        data["states"][name] = body

    return inject


def _block(lines: list[str], name: str) -> tuple[int, int]:
    start = lines.index(f"  {name}:\n")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("   ")), None)
    return start, len(lines) if end is None else end


def _state_twice(name: str) -> Callable[[str], str]:
    """The state's block written again right after itself (a state defined twice)."""

    def post(text: str) -> str:
        lines = text.splitlines(keepends=True)
        start, end = _block(lines, name)
        return "".join(lines[:end] + lines[start:end] + lines[end:])

    return post


def _key_twice(name: str, line: str, again: str) -> Callable[[str], str]:
    """``again`` inserted after ``line`` inside the state's block (a nested key twice)."""

    def post(text: str) -> str:
        lines = text.splitlines(keepends=True)
        start, end = _block(lines, name)
        at = next(i for i in range(start, end) if lines[i] == line + "\n")
        return "".join([*lines[: at + 1], again + "\n", *lines[at + 1 :]])

    return post


def _resources(data: dict[str, Any]) -> None:
    data.setdefault("resources", {})["badres"] = {"cloud": "kubernetes", "cpus": "twoq"}


DEFECTS = (
    Defect(
        "tool-and-run",
        _state("q-tool", {"toolRef": "workbench.rerun.report", "run": {"shell": "echo qtool"}}),
        (("$.states.q-tool.run", "q-tool:", "run:", "mutually exclusive"),),
    ),
    Defect(
        "argv-and-shell",
        _state("q-argv", {"run": {"argv": ["echo"], "shell": "echo qargv"}, "next": "end"}),
        (("$.states.q-argv.run.shell", "q-argv:", "qargv", "mutually exclusive"),),
    ),
    Defect(
        "empty-loop",
        _state("q-loop", {"loop": {"max": 2}, "next": "end"}),
        (("$.states.q-loop.loop", "q-loop:", "loop:", "loop has no body"),),
    ),
    Defect(
        "unclosed-brace",
        _state("q-brace", {"run": {"shell": "echo qbrace {{config.bucket"}, "next": "end"}),
        (("$.states.q-brace.run.shell", "q-brace:", "qbrace", "unclosed"),),
    ),
    Defect(
        "transition-index",
        _state(
            "q-tr",
            {
                "run": {"shell": "echo qtr"},
                "transitions": [{"when": "loop_back"}, {"goto": "nowhere"}],
                "next": "end",
            },
        ),
        (
            ("$.states.q-tr.transitions[0]", "q-tr:", "when: loop_back", "needs goto"),
            ("$.states.q-tr.transitions[1].goto", "q-tr:", "nowhere", "unknown state"),
        ),
    ),
    Defect(
        "three-tokens",
        _state(
            "q-tok",
            {"run": {"shell": "echo {{config.qa}} {{config.qb}} {{config.qc}}"}, "next": "end"},
        ),
        (
            ("$.states.q-tok.run.shell", "q-tok:", "qa}}", "'qa'"),
            ("$.states.q-tok.run.shell", "q-tok:", "qa}}", "'qb'"),
            ("$.states.q-tok.run.shell", "q-tok:", "qa}}", "'qc'"),
        ),
    ),
    Defect(
        "cpus-word",
        _resources,
        (("$.resources.badres.cpus", "badres:", "twoq", "cpus must be a number"),),
    ),
    Defect(
        "unknown-key",
        _state("q-nxt", {"run": {"shell": "echo qnxt"}, "nxt": "end", "next": "end"}),
        (("$.states.q-nxt.nxt", "q-nxt:", "nxt:", "unknown state key 'nxt'"),),
        warning=True,
    ),
    Defect(
        "state-twice",
        _state("q-dup", {"run": {"shell": "echo qdup"}, "next": "end"}),
        (("$.states.q-dup", "q-dup:", "q-dup:", "duplicate key 'q-dup'"),),
        post=_state_twice("q-dup"),
    ),
    Defect(
        "nested-key-twice",
        _state("q-dk", {"run": {"shell": "echo qdk"}, "next": "end"}),
        (("$.states.q-dk.run.shell", "q-dk:", "qdk2", "duplicate key 'shell'"),),
        post=_key_twice("q-dk", "      shell: echo qdk", "      shell: echo qdk2"),
    ),
)


def _line(text: str, anchor: str, needle: str) -> int:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == anchor)
    return next(i for i in range(start + 1, len(lines)) if needle in lines[i]) + 1


def _report(text: str) -> tuple[list[SpecIssue], list[SpecIssue]]:
    with pytest.raises(SpecError) as err:
        load_validated("t.yaml", BUILTIN, text=text)
    return err.value.issues, err.value.warnings


@given(valid_spec_texts(), st.sets(st.sampled_from(range(len(DEFECTS))), min_size=1))
def test_load_validated_injected_defects_all_reported_at_their_lines(
    base: str, chosen: set[int]
) -> None:
    _check_defects(base, chosen)


def test_load_validated_every_defect_at_once_one_pass() -> None:
    # the duplicate keys come from the loader, the rest from validation: one report
    base = (
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
        "config: {bucket: b, root_uri: s3://b/r}\nstates:\n"
        "  s0:\n    run: {shell: echo s0}\n    next: end\n"
        "  end:\n    run: {shell: echo end}\n    terminal: true\n"
    )
    _check_defects(base, set(range(len(DEFECTS))))


def _check_defects(base: str, chosen: set[int]) -> None:
    data = yaml.safe_load(base)
    defects = [DEFECTS[i] for i in sorted(chosen)]
    if all(d.warning for d in defects):
        defects.append(DEFECTS[0])  # a warning alone does not fail validation
    for defect in defects:
        defect.inject(data)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    for defect in defects:
        text = defect.post(text) if defect.post else text
    issues, warnings = _report(text)
    keys = [(i.path, i.message) for i in issues]
    assert len(keys) == len(set(keys)), "each problem is reported once"
    for defect in defects:
        pool = warnings if defect.warning else issues
        for path, anchor, needle, part in defect.expect:
            line = _line(text, anchor, needle)
            hits = [i for i in pool if i.path == path and part in i.message]
            assert hits, f"{defect.name}: nothing at {path} containing {part!r}"
            assert hits[0].line == line, f"{defect.name}: {hits[0]} not at line {line}"


def test_load_validated_unknown_key_warning_has_did_you_mean() -> None:
    data = yaml.safe_load(
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
        "states:\n  a:\n    run: {shell: echo a}\n    nxt: b\n    next: b\n"
        "  b:\n    run: {shell: echo b}\n    terminal: true\n"
    )
    v = load_validated("t.yaml", BUILTIN, text=yaml.safe_dump(data, sort_keys=False))
    assert "did you mean 'next'?" in v.warnings[0].hint


def test_load_validated_unread_var_warns_and_strict_errors() -> None:
    text = (
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
        "config: {bucket: b}\nstates:\n  a:\n    run: {shell: 'echo {{config.bucket}}'}\n"
        "    terminal: true\n"
    )
    v = load_validated("t.yaml", BUILTIN, {"buckt": "x"}, text=text)
    assert [w.path for w in v.warnings] == ["--var buckt"]
    assert "did you mean 'bucket'?" in v.warnings[0].hint
    with pytest.raises(SpecError) as err:
        load_validated("t.yaml", BUILTIN, {"buckt": "x"}, text=text, strict=True)
    assert [i.path for i in err.value.issues] == ["--var buckt"]
    assert load_validated("t.yaml", BUILTIN, {"bucket": "x"}, text=text, strict=True)


def test_load_validated_misspelled_state_token_has_did_you_mean() -> None:
    text = (
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\nstates:\n"
        "  train:\n    run: {shell: echo a}\n    outputs: [{uri: s3://b/m}]\n    next: b\n"
        "  b:\n    run: {shell: 'echo {{state.trian.uri}}'}\n    terminal: true\n"
    )
    issues, _ = _report(text)
    assert issues[0].path == "$.states.b.run.shell"
    assert "did you mean 'train'?" in issues[0].hint


# fmt: off
RESOURCE_CASES = [
    ("cpus", 4, True, None), ("cpus", "4+", True, None), ("cpus", 0.5, True, None),
    ("cpus", "two", True, "cpus must be"), ("cpus", 0, False, "positive"),
    ("cpus", True, False, "cpus must be"), ("cpus", "nan", False, "cpus must be"),
    ("memory", "16Gi", True, None), ("memory", "16+", True, None), ("memory", "16GB", True, None),
    ("memory", 16, False, None), ("memory", "lots", True, "memory must be"),
    ("memory", "0", True, "positive"), ("memory", "16Gi+", True, None),
    ("disk_size", 100, True, None), ("disk_size", "100Gi", True, None),
    ("disk_size", "100GB", True, "whole number"), ("disk_size", 0, True, "positive"),
    ("accelerators", "H100:1", True, None), ("accelerators", {"H100": 1}, True, None),
    ("accelerators", "H100", True, None), ("accelerators", "H100x1", True, "name and a count"),
    ("accelerators", "8xH100", True, "name and a count"), ("accelerators", "RTX6000", True, None),
    ("accelerators", "H100:1:2", True, "<name>:<count>"), ("accelerators", "H100:0", True, ">= 1"),
    ("accelerators", {"H100": 1, "A100": 1}, True, "exactly one"),
    ("use_spot", True, True, None), ("use_spot", "true", True, "true or false"),
    ("cloud", "kubernetes", True, None), ("cloud", "k8s", True, "unknown cloud"),
]
# fmt: on


@pytest.mark.parametrize(
    ("key", "value", "k8s", "problem"),
    RESOURCE_CASES,
    ids=[f"{k}-{v}-{'k8s' if c else 'other'}" for k, v, c, _p in RESOURCE_CASES],
)
def test_resources_problem_matches_table(
    key: str, value: object, k8s: bool, problem: str | None
) -> None:
    found = resources.problem(key, value, kubernetes=k8s)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found[0]


def test_load_validated_resolved_profile_token_checked_per_state() -> None:
    text = (
        "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
        "config: {c: lots}\nresources:\n  default:\n    cloud: kubernetes\n"
        "    memory: '{{config.c}}'\nstates:\n  a:\n    run: {shell: echo a}\n    terminal: true\n"
    )
    issues, _ = _report(text)
    assert issues[0].path == "$.resources.default.memory"
    assert "as resolved for state 'a'" in issues[0].message
