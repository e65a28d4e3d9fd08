"""Pytest fixtures for moto's S3 server.

Use them from a conftest with a plain import (``pytest_plugins`` is only
allowed in the root conftest), as ``tests/integration/storage/conftest.py`` does::

    from tests.support.moto_plugin import moto_server, s3_server  # noqa: F401

``s3_server`` gives each test an empty server, fake credentials, region
us-east-1, no AWS profile or config file, and ``AWS_ENDPOINT_URL`` pointing at
the server, so code that relies on boto3's own endpoint resolution can never
reach real AWS.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.motoserver import REGION, MotoS3, MotoServer

__all__ = ["moto_server", "s3_server"]

_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",  # never probe instance metadata for credentials
}
_CLEARED_ENV = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CA_BUNDLE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto server for the session, on an ephemeral loopback port."""
    server = MotoServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_server(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[MotoS3]:
    """An empty S3 server and an AWS environment that can only reach it."""
    for name in _CLEARED_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in _FAKE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint_url)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    moto_server.reset()
    try:
        yield MotoS3(server=moto_server, region=REGION)
    finally:
        moto_server.reset()
