"""libyaml's emitter where it writes PyYAML's own bytes (issue 19).

``dump_documents`` emits with libyaml's ``CSafeDumper`` when every string of the
documents passes ``_libyaml_safe``, and with PyYAML's pure emitter otherwise. The
rendered text is a wave's identity, so the two must agree byte for byte on every
document the fast path takes: every rendered task of the reference workflows, the
test workflows and (when ``NPA_SPEC_CORPUS`` is set) the spec corpus, in one-shot and
runtime mode, and on generated documents.
"""

from __future__ import annotations

import copy
import enum
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given

from npa_infra.catalog.loader import select_catalog
from npa_infra.errors import NpaError
from npa_infra.plan.model import PlanError
from npa_infra.plan.planner import build_plan
from npa_infra.render import documents
from npa_infra.render.documents import dump_documents, render_plan
from npa_infra.render.tasks import RenderSettings
from npa_infra.workflow.planning.loading import load_validated
from tests.strategies import REPO, yaml_documents

SRC = "s3://npa-emitter-src/npa-src/npa/fingerprint/"


def _specs() -> list[Path]:
    found = sorted((REPO / "workflows" / "main").glob("*.yaml"))
    found += sorted((REPO / "workflows" / "testing").glob("*.yaml"))
    corpus = os.environ.get("NPA_SPEC_CORPUS", "")
    if corpus:
        found += sorted(Path(corpus).glob("*.yaml"))
    return found


def _rendered(path: Path) -> list[documents.RenderedJob]:
    env = {k: v for k, v in os.environ.items() if k != "NPA_TOOL_CATALOG"}
    if path.parent.name not in ("main", "testing"):
        env = dict(os.environ)  # the corpus is written against the shared catalog
    catalog = select_catalog(None, env)
    try:
        spec = load_validated(path, catalog).spec
        jobs: list[documents.RenderedJob] = []
        for decision in ("", "promote_checkpoint", "loop_back"):
            plan = build_plan(spec, catalog, run_id=f"{spec.name}-e", assume_decision=decision)
            settings = RenderSettings(
                workflow=spec.name, run_id=plan.run_id, config=plan.config, src_s3_uri=SRC
            )
            for runtime in (False, True):
                jobs += render_plan(plan, settings, runtime=runtime)
        return jobs
    except (NpaError, PlanError):  # a spec the renderer refuses has no bytes to compare
        return []


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[documents.RenderedJob]]:
    return {str(p): _rendered(p) for p in _specs()}


def test_dumper_with_libyaml_is_the_c_emitter() -> None:
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml: the pure emitter is the only one")

    assert issubclass(documents._Dumper, yaml.CSafeDumper)


def test_dump_documents_reference_and_test_specs_c_bytes_equal_pure(
    rendered: dict[str, list[documents.RenderedJob]],
) -> None:
    compared = 0
    for spec, jobs in rendered.items():
        for job in jobs:
            assert job.text == dump_documents(job.documents, pure=True), spec
            for doc in job.documents:
                assert dump_documents((doc,)) == dump_documents((doc,), pure=True), spec
                compared += 1

    # both reference workflows and the test workflows render (the corpus adds more)
    assert sum(1 for jobs in rendered.values() if jobs) >= 8
    assert compared > 100


def test_dump_documents_reference_specs_take_the_libyaml_path(
    rendered: dict[str, list[documents.RenderedJob]],
) -> None:
    reference = [j for s, jobs in rendered.items() if "/workflows/main/" in s for j in jobs]

    assert reference
    assert all(all(map(documents._libyaml_safe, j.documents)) for j in reference)


@pytest.mark.parametrize(
    "value",
    ["\U0001f600", "a\rb", "\n", "a\n\n", "tab\there", "caf\u00e9", ("tuple",)],
    ids=["astral", "carriage-return", "only-newline", "doubled-trailing", "tab", "latin1", "tuple"],
)
def test_libyaml_safe_value_libyaml_differs_or_unsupported_false(value: Any) -> None:
    assert not documents._libyaml_safe({"k": value})


@pytest.mark.parametrize("key", ["", "a\nb", "a\rb"], ids=["empty", "newline", "cr"])
def test_libyaml_safe_key_libyaml_differs_false(key: str) -> None:
    assert not documents._libyaml_safe({key: 1})


def test_dump_documents_outside_the_safe_set_pure_bytes() -> None:
    docs = ({"name": "h", "execution": "serial"}, {"": "\U0001f600", "run": "\n"})

    assert dump_documents(docs) == dump_documents(docs, pure=True)


@given(yaml_documents())
def test_dump_documents_generated_documents_c_bytes_equal_pure(doc: dict[str, Any]) -> None:
    docs = ({"name": "h", "execution": "serial"}, doc)

    assert dump_documents(docs) == dump_documents(docs, pure=True)


# The C path feeds libyaml events (``_write_events``) instead of a node tree; its bytes
# must be the node tree's (``_dump_nodes`` with the same C dumper), so the fast path
# changes no rendered byte (issue 19).

_libyaml = pytest.mark.skipif(
    not getattr(yaml, "__with_libyaml__", False), reason="PyYAML without libyaml"
)
HEADER = {"name": "h", "execution": "serial"}


def _nodes(docs: tuple[dict[str, Any], ...]) -> str:
    return documents._dump_nodes(docs, documents._Dumper)


@_libyaml
def test_write_events_reference_and_test_specs_bytes_equal_node_tree(
    rendered: dict[str, list[documents.RenderedJob]],
) -> None:
    compared = 0
    for spec, jobs in rendered.items():
        for job in jobs:
            if all(map(documents._libyaml_safe, job.documents)):
                assert documents._write_events(job.documents) == _nodes(job.documents), spec
                compared += 1
            else:  # e.g. a corpus run script with an em dash: PyYAML's emitter writes it
                with pytest.raises(documents._Unsafe):
                    documents._write_events(job.documents)
                assert job.text == dump_documents(job.documents, pure=True), spec

    assert compared > 20


@_libyaml
@pytest.mark.parametrize(
    "value",
    [
        "",
        "~",
        "null",
        "True",
        "yes",
        "off",
        "123",
        "-1.5e3",
        "0x1f",
        ".inf",
        "2001-12-14",
        "<<",
        "=",
        "a: b",
        "- a",
        "#x",
        "'q'",
        "a\nb",
        "a\n",
        " lead",
        "word " * 40,
        0,
        -7,
        10**20,
        1.5,
        -0.0,
        float("inf"),
        float("nan"),
        True,
        None,
        [],
        {},
        [[1, "x"], {"k": None}],
    ],
    ids=lambda v: repr(v)[:24],
)
def test_write_events_scalar_and_container_bytes_equal_node_tree(value: Any) -> None:
    def fresh() -> Any:  # a shared dict or list is the anchored case below
        return copy.deepcopy(value)

    key = str(value) if documents._libyaml_safe(str(value), key=True) else "e"
    docs = (HEADER, {"k": fresh(), "l": [fresh(), fresh()]}, {key: fresh()})

    assert documents._write_events(docs) == _nodes(docs)


@_libyaml
@pytest.mark.parametrize(
    "doc",
    [{"k": "caf\u00e9"}, {"k": ["a", "\n"]}, {"a\nb": 1}, {"k": {"": 1}}],
    ids=["latin1-value", "only-newline-item", "multi-line-key", "empty-key"],
)
def test_write_events_string_outside_safe_set_unsafe_dump_pure_bytes(doc: dict[str, Any]) -> None:
    docs = (HEADER, doc)

    with pytest.raises(documents._Unsafe):
        documents._write_events(docs)
    assert dump_documents(docs) == dump_documents(docs, pure=True)


@_libyaml
def test_write_events_dict_shared_in_one_document_unsupported_dump_keeps_anchors() -> None:
    shared = {"a": 1}
    docs = (HEADER, {"x": shared, "y": shared})

    with pytest.raises(documents._Unsupported):
        documents._write_events(docs)
    assert dump_documents(docs) == _nodes(docs)
    assert "&id001" in dump_documents(docs)


@_libyaml
def test_write_events_dict_shared_across_documents_bytes_equal_node_tree() -> None:
    shared = {"a": [1, 2]}
    docs = (HEADER, {"x": shared}, {"y": shared})

    assert documents._write_events(docs) == _nodes(docs)


@_libyaml
def test_dump_documents_str_subclass_refused_as_the_node_tree_refuses() -> None:
    class Kind(enum.StrEnum):
        A = "a"

    docs = (HEADER, {"kind": Kind.A})

    with pytest.raises(documents._Unsupported):
        documents._write_events(docs)
    with pytest.raises(yaml.representer.RepresenterError):
        dump_documents(docs)


@_libyaml
@given(yaml_documents())
def test_write_events_generated_documents_bytes_equal_node_tree_or_unsafe(
    doc: dict[str, Any],
) -> None:
    docs = (HEADER, doc)

    if all(map(documents._libyaml_safe, docs)):
        assert documents._write_events(docs) == _nodes(docs)
    else:
        with pytest.raises(documents._Unsafe):
            documents._write_events(docs)
