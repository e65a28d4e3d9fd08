"""Fixtures for the stack's dynamic providers: moto S3, the Kubernetes double, the sky simulator."""

from __future__ import annotations

from tests.support.fakekube.pytest_plugin import fake_kube
from tests.support.moto_plugin import moto_server, s3_server

__all__ = ["fake_kube", "moto_server", "s3_server"]
