"""``docs/spec-format.md`` stays true to the project (issue 18).

Its section headings are the anchors validation hints link to; each worked
example is a byte-identical copy of a file under ``workflows/testing/``, and
each of those files validates and plans to the steps the page describes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from npa_infra.spec import issues, schema
from npa_infra.workflow.planning import api

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "spec-format.md"
TEXT = DOC.read_text(encoding="utf-8")
# the anchors validation hints link to (spec.issues), and the examples
SECTIONS = (*issues.SECTIONS, "examples")
_EXAMPLE = re.compile(r"<!-- example: (\S+) -->\n```yaml\n(.*?)```\n", re.S)
EXAMPLES = {path: block for path, block in _EXAMPLE.findall(TEXT)}
# (file, assumed decision) -> the planned states, in order
PLANS = {
    ("linear-chain.yaml", ""): ["check-trigger", "split", "report"],
    ("parallel-fanout.yaml", ""): ["shard-0", "shard-1", "shard-2", "aggregate"],
    ("loop-decision.yaml", ""): [*["evaluate", "decide"] * 3, "route", "escalate"],
    ("loop-decision.yaml", "promote_checkpoint"): ["evaluate", "decide", "route", "publish"],
}


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^a-z0-9 -]", "", heading.strip().lower()).replace(" ", "-")


def test_spec_format_doc_has_every_section_anchor() -> None:
    slugs = [_slug(h) for h in re.findall(r"^## (.+)$", TEXT, re.M)]
    assert [s for s in SECTIONS if s not in slugs] == []


def test_spec_format_doc_anchor_links_resolve() -> None:
    slugs = {_slug(h) for h in re.findall(r"^#{2,3} (.+)$", TEXT, re.M)}
    links = set(re.findall(r"\]\(#([a-z0-9-]+)\)", TEXT))
    assert links and links - slugs == set()


def test_schema_descriptions_link_existing_sections() -> None:
    found = set(re.findall(r"spec-format\.md#([a-z0-9-]+)", repr(schema.workflow_schema())))
    assert found and found - set(SECTIONS) == set()


def test_spec_format_doc_embeds_chain_fanout_and_loop() -> None:
    assert sorted(EXAMPLES) == [
        "workflows/testing/linear-chain.yaml",
        "workflows/testing/loop-decision.yaml",
        "workflows/testing/parallel-fanout.yaml",
    ]


@pytest.mark.parametrize("path", sorted(EXAMPLES), ids=lambda p: Path(p).name)
def test_spec_format_example_byte_identical_to_file(path: str) -> None:
    assert EXAMPLES[path].encode("utf-8") == (ROOT / path).read_bytes()


@pytest.mark.parametrize(
    ("name", "assume"),
    sorted(PLANS, key=str),
    ids=[f"{n}-{a or 'default'}" for n, a in sorted(PLANS, key=str)],
)
def test_spec_format_example_validates_and_plans(name: str, assume: str) -> None:
    path = ROOT / "workflows" / "testing" / name
    assert f"workflows/testing/{name}" in EXAMPLES
    report = api.validate_spec(path, env={})  # the built-in catalog only
    assert report.warnings == []
    plan = api.plan_spec(path, assume_decision=assume, env={}).plan
    assert [step.state for step in plan.steps] == PLANS[(name, assume)]
