"""A succeeded wave counts only when its declared outputs validate (issue 9), against moto S3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.errors import LaunchFailedError, UncertainOutcomeError
from npa_infra.journal.store import Journal
from npa_infra.storage.s3 import BotoStore
from npa_infra.workflow.supervision import completion
from tests.support.motoserver import MotoS3
from tests.unit.journal import a_run, a_wave, an_attempt

BUCKET = "outputs"
REPORT = f"s3://{BUCKET}/r1/report.json"
SHARDS = f"s3://{BUCKET}/r1/shards/"
SCHEMAS = {REPORT: "npa.test.report.v1"}


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    opened = Journal.open(tmp_path / "home")
    opened.create_run(a_run())
    opened.upsert_wave(a_wave())
    opened.create_attempt(an_attempt())
    try:
        yield opened
    finally:
        opened.close()


def _validate(journal: Journal, s3: MotoS3, *uris: str) -> object:
    return completion.validate_outputs(
        journal=journal,
        run_id="r1",
        wave_index=0,
        attempt=1,
        what="wave 00 (r1-00-train)",
        uris=uris,
        schemas=SCHEMAS,
        store=lambda: BotoStore.create(s3.endpoint_url),
        now=lambda: 5.0,
    )


def test_validate_outputs_present_counts_and_records_schema_labels(
    journal: Journal, s3_server: MotoS3
) -> None:
    s3_server.create_bucket(BUCKET)
    s3_server.put(BUCKET, "r1/report.json", b"{}")
    s3_server.put(BUCKET, "r1/shards/0.tar", b"x")
    assert _validate(journal, s3_server, REPORT, SHARDS) is None
    attempt = journal.latest_attempt("r1", 0)
    assert attempt is not None
    outputs = attempt.data["outputs"]
    assert [(o["uri"], o["state"], o.get("schema")) for o in outputs] == [
        (REPORT, "present", "npa.test.report.v1"),
        (SHARDS, "present", None),
    ]
    assert journal.waves("r1")[0].status == "succeeded"
    [(kind, data)] = [(e.kind, e.data) for e in journal.events("r1")]
    assert (kind, data["verdict"]) == ("outputs_validated", "valid")


@pytest.mark.parametrize(
    ("objects", "state"),
    [({}, "absent"), ({"r1/report.json": b""}, "empty")],
    ids=["absent", "empty"],
)
def test_validate_outputs_missing_or_empty_fails_the_wave(
    journal: Journal, s3_server: MotoS3, objects: dict[str, bytes], state: str
) -> None:
    s3_server.create_bucket(BUCKET)
    for key, body in objects.items():
        s3_server.put(BUCKET, key, body)
    error = _validate(journal, s3_server, REPORT)
    assert isinstance(error, LaunchFailedError)
    assert f"is {state}" in error.message and "does not count as complete" in error.message
    assert journal.waves("r1")[0].status == "failed"


def test_validate_outputs_unreadable_store_is_uncertain_never_complete(
    journal: Journal, s3_server: MotoS3
) -> None:
    error = _validate(journal, s3_server, REPORT)  # no bucket: the store cannot say
    assert isinstance(error, UncertainOutcomeError)
    assert journal.waves("r1")[0].status == "pending"
    assert [e.data["verdict"] for e in journal.events("r1")] == ["indeterminate"]
