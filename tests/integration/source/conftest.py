"""Fixtures for source staging against moto's S3 server over loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_infra.storage.s3 import BotoStore
from tests.support.moto_plugin import moto_server, s3_server
from tests.support.motoserver import MotoS3

__all__ = ["BUCKET", "checkout", "moto_server", "s3_server", "store"]

BUCKET = "npa-src-test"


@pytest.fixture
def store(s3_server: MotoS3) -> BotoStore:
    s3_server.create_bucket(BUCKET)
    return BotoStore.create(endpoint_url=s3_server.endpoint_url, region=s3_server.region)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A small checkout (walk listing): source, an executable, and sensitive files."""
    root = tmp_path / "checkout"
    (root / "pkg").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "tls").mkdir()
    (root / ".aws").mkdir()
    (root / "pkg" / "__init__.py").write_text('"""pkg."""\n')
    (root / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (root / "README.md").write_text("# checkout\n")
    script = root / "bin" / "run.sh"
    script.write_text("#!/bin/sh\necho run\n")
    script.chmod(0o755)
    (root / ".env").write_text("API_TOKEN=do-not-upload\n")
    (root / "tls" / "server.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    (root / ".aws" / "credentials").write_text("[default]\naws_secret_access_key=x\n")
    (root / "app.log").write_text("noise\n")
    return root
