"""Shared helpers for the API double's tests: pod bodies, Status bodies, raw GETs, per-context clients."""

from __future__ import annotations

import json
import re
from typing import Any

from kubernetes import client, config

from tests.support.fakekube import FakeKube

__all__ = [
    "DIGEST",
    "IMAGE",
    "NS",
    "UUID4",
    "client_for",
    "gpu_pod",
    "pod_body",
    "raw_get",
    "status_body",
]

NS = "team-a"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"ghcr.io/acme/trainer@{DIGEST}"
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def pod_body(
    name: str, *, labels: dict[str, str] | None = None, image: str = IMAGE, **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": {"containers": [{"name": "main", "image": image}], **spec}}


def gpu_pod(name: str, gpus: int) -> dict[str, Any]:
    """A pod that sets only GPU limits: requests default to them."""
    container = {
        "name": "main",
        "image": IMAGE,
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


def status_body(error: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    return body


def raw_get(
    api: client.ApiClient, path: str, query: list[tuple[str, str]] | None = None
) -> tuple[int, str]:
    """GET a non-resource path through the official client's transport."""
    method, url, headers, body, post = api.param_serialize(
        "GET", path, query_params=query or [], auth_settings=["BearerToken"]
    )
    response = api.call_api(method, url, headers, body, post)
    response.read()
    return response.status, response.data.decode()


def client_for(fake: FakeKube, context: str, *, retries: bool = True) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(
        str(fake.kubeconfig), context=context, client_configuration=configuration
    )
    if not retries:
        configuration.retries = False
    return client.ApiClient(configuration)
