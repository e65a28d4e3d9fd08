"""Fixtures for the storage adapter's integration tests: moto's S3 server over loopback."""

from __future__ import annotations

from tests.support.moto_plugin import moto_server, s3_server

__all__ = ["moto_server", "s3_server"]
