"""moto in server mode on loopback: a real S3 wire protocol for the real boto3 client.

No in-process ``mock_aws`` patching: ``BotoStore`` builds its own boto3 client,
signs real requests and parses real HTTP answers, exactly as against S3 or
MinIO. One server runs per test session on an ephemeral port of 127.0.0.1;
``reset()`` (moto's ``POST /moto-api/reset``) empties it between tests.
"""

from __future__ import annotations

import logging
import urllib.request
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

__all__ = ["REGION", "MotoS3", "MotoServer"]

REGION = "us-east-1"


@dataclass
class MotoServer:
    """A started ``ThreadedMotoServer``; ``stop()`` shuts it down."""

    endpoint_url: str
    _server: Any = field(repr=False)

    @classmethod
    def start(cls) -> MotoServer:
        from moto.server import ThreadedMotoServer

        # werkzeug logs every request at INFO; a set level also stops it adding a handler.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        return cls(endpoint_url=f"http://{host}:{port}", _server=server)

    def reset(self) -> None:
        """Forget every bucket and object (moto's reset endpoint)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    @cached_property
    def client(self) -> Any:
        """A boto3 S3 client on the server (path-style), independent of the code under test.

        Built once per server: a boto3 session loads its service models (~0.3 s).
        Credentials are passed explicitly, so later environment changes do not matter.
        """
        import boto3
        from botocore.config import Config

        return boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        ).client(
            "s3",
            endpoint_url=self.endpoint_url,
            config=Config(s3={"addressing_style": "path"}),
        )

    def stop(self) -> None:
        self._server.stop()


@dataclass(frozen=True)
class MotoS3:
    """What a test sees: the endpoint, the region, and a boto3 client to arrange state with."""

    server: MotoServer = field(repr=False)
    region: str = REGION

    @property
    def endpoint_url(self) -> str:
        return self.server.endpoint_url

    @property
    def client(self) -> Any:
        """The server's own boto3 client (path-style), independent of the code under test."""
        return self.server.client

    def create_bucket(self, name: str) -> None:
        self.client.create_bucket(Bucket=name)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)
