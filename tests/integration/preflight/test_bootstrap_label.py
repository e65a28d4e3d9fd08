"""The bootstrap-contract label rule against the real registry (runtime-reference.md §8, registry.md §3).

Images are pushed with their config's ``config.Labels`` (registry.md §5.5)
under ``npa-*`` repositories of a registry passed as trusted. The fault proxy
counts what the client asked for (no blob request for an untrusted image)
and stands in for an object store a blob answer redirects to; the token
issuer's records show that reading the labels buys no second token.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from npa_infra.registry import credentials, reference
from npa_infra.registry.client import RegistryClient
from npa_infra.registry.models import LINUX_AMD64, CheckStatus, ImageRef
from npa_infra.workflow.planning import api
from npa_infra.workflow.target.services import Services
from preflight import images as preflight_images
from preflight.images import ImagePreflightReport
from preflight.targets import ImageTarget
from tests.support.registry.faults import Fault, FaultProxy
from tests.support.registry.push import BOOTSTRAP_LABEL, ImageKind
from tests.support.registry.server import Registry

ProxyFactory = Callable[[Registry], FaultProxy]
LABELLED = dict([BOOTSTRAP_LABEL])
LABEL = BOOTSTRAP_LABEL[0]


def _client(registry: Registry, *, host: str | None = None, user: str = "") -> RegistryClient:
    env = {}
    if user:
        env = {
            "NPA_REGISTRY_SERVER": host or registry.host,
            "NPA_REGISTRY_USERNAME": user,
            "NPA_REGISTRY_PASSWORD": registry.users[user],
        }
    return RegistryClient(
        credentials=credentials.from_environment(env),
        verify=str(registry.ca_path) if registry.ca_path is not None else True,
    )


def _preflight(
    registry: Registry, images: list[str], trusted: list[str], **kwargs: str
) -> ImagePreflightReport:
    targets = [ImageTarget(image, ("s",)) for image in images]
    with _client(registry, **kwargs) as client:
        return preflight_images.check_images(targets, client, trusted_registries=trusted)


def _blobs(proxy: FaultProxy) -> list[str]:
    return [r.path for r in proxy.requests if "/blobs/" in r.path]


# -- the rule on every image shape ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "platforms", "labels", "status"),
    [
        ("oci-manifest", ("linux/amd64",), LABELLED, CheckStatus.OK),
        ("docker-manifest", ("linux/amd64",), LABELLED, CheckStatus.OK),
        ("oci-index", ("linux/arm64", "linux/amd64"), LABELLED, CheckStatus.OK),
        ("docker-list", ("linux/amd64", "linux/arm64"), LABELLED, CheckStatus.OK),
        ("oci-index", ("linux/arm64", "linux/amd64"), None, CheckStatus.PROBE_INCOMPATIBLE),
        ("oci-manifest", ("linux/amd64",), {"other": "x"}, CheckStatus.PROBE_INCOMPATIBLE),
        (
            "oci-index",
            ("linux/amd64",),
            {LABEL: "skypilot-0.11.0-v1"},
            CheckStatus.PROBE_INCOMPATIBLE,
        ),
    ],
    ids=[
        "single-labelled",
        "docker-single-labelled",
        "index-two-platforms-labelled",
        "docker-list-labelled",
        "index-without-label",
        "single-other-labels-only",
        "wrong-value",
    ],
)
def test_label_rule_on_pushed_images(
    request: pytest.FixtureRequest,
    registry_plain: Registry,
    fault_proxy: ProxyFactory,
    kind: ImageKind,
    platforms: tuple[str, ...],
    labels: dict[str, str] | None,
    status: CheckStatus,
) -> None:
    tag = request.node.callspec.id  # one tag per case: pushes are session-wide
    pushed = registry_plain.push(
        "public/npa-shapes", tag, kind=kind, platforms=platforms, labels=labels
    )
    proxy = fault_proxy(registry_plain)
    image = f"{proxy.host}/public/npa-shapes:{tag}"

    report = _preflight(registry_plain, [image], [f"{proxy.host}/public"])

    (row,) = report.rows
    assert row.status is status, row.detail
    assert row.digest == pushed.digest
    amd64 = pushed.child("linux/amd64")
    assert _blobs(proxy) == [f"/v2/public/npa-shapes/blobs/{amd64.config.digest}"]
    by_digest = [r.path for r in proxy.requests if r.path.endswith(amd64.digest)]
    assert by_digest == [f"/v2/public/npa-shapes/manifests/{amd64.digest}"]
    if status is CheckStatus.PROBE_INCOMPATIBLE:
        assert report.exit_code == 1
        assert LABEL in row.detail and "skypilot-0.12.2-v1" in row.detail
        found = (labels or {}).get(LABEL)
        assert (repr(found) if found else "is missing") in row.detail
        assert row.remedy.startswith(f"rebuild the image with LABEL {LABEL}=skypilot-0.12.2-v1")
    else:
        assert report.exit_code == 0


def test_untrusted_images_never_fetch_a_blob(
    registry_plain: Registry, fault_proxy: ProxyFactory
) -> None:
    registry_plain.push("public/app", "v1")
    registry_plain.push("other/npa-app", "v1")
    labelled = registry_plain.push("public/npa-app", "v1", labels=LABELLED)
    proxy = fault_proxy(registry_plain)
    untrusted = [f"{proxy.host}/public/app:v1", f"{proxy.host}/other/npa-app:v1"]

    report = _preflight(registry_plain, untrusted, [f"{proxy.host}/public"])
    before = proxy.requests
    both = _preflight(
        registry_plain, [*untrusted, f"{proxy.host}/public/npa-app:v1"], [f"{proxy.host}/public"]
    )

    assert [r.status for r in report.rows] == [CheckStatus.OK, CheckStatus.OK]
    assert {r.path for r in before} == {
        "/v2/public/app/manifests/v1",
        "/v2/other/npa-app/manifests/v1",
    }
    assert both.exit_code == 0
    config = labelled.child("linux/amd64").config.digest
    assert _blobs(proxy) == [f"/v2/public/npa-app/blobs/{config}"]


# -- token auth: the check's token serves the label read ------------------------------------------


def test_token_label_read_reuses_the_checks_token(registry_token: Registry) -> None:
    registry_token.push(
        "team/npa-private", "v1", platforms=("linux/arm64", "linux/amd64"), labels=LABELLED
    )
    registry_token.push("team/npa-bare", "v1")
    registry_token.reset()
    images = [
        registry_token.ref("team/npa-private", "v1"),
        registry_token.ref("team/npa-bare", "v1"),
    ]

    report = _preflight(registry_token, images[:1], [registry_token.host], user="alice")
    assert registry_token.issuer is not None
    issued = [
        (r.authorization and r.authorization.split()[0], r.status)
        for r in registry_token.issuer.requests
    ]
    bare = _preflight(registry_token, images[1:], [f"{registry_token.host}/team"], user="alice")

    assert [r.status for r in report.rows] == [CheckStatus.OK]
    assert issued == [(None, 200), ("Basic", 200)]  # the check's two; the labels bought none
    assert [r.status for r in bare.rows] == [CheckStatus.PROBE_INCOMPATIBLE]
    assert bare.exit_code == 1


def test_token_label_requests_carry_the_bearer_and_skip_the_anonymous_round(
    registry_token: Registry, fault_proxy: ProxyFactory
) -> None:
    registry_token.push("team/npa-private", "v1", labels=LABELLED)
    proxy = fault_proxy(registry_token)
    image = f"{proxy.host}/team/npa-private:v1"

    report = _preflight(registry_token, [image], [proxy.host], host=proxy.host, user="alice")

    assert report.exit_code == 0, report.rows[0].detail
    by_tag = [r for r in proxy.requests if r.path.endswith("/manifests/v1")]
    label_reads = [r for r in proxy.requests if "sha256:" in r.path]
    assert len(by_tag) == 3  # the check: anonymous, anonymous token, alice's token
    # the label reads: the platform manifest by digest, then the config blob, each once with
    # the check's Bearer (no anonymous 401 round first)
    assert ["/manifests/" in r.path for r in label_reads] == [True, False]
    assert all(r.authorization and r.authorization.startswith("Bearer ") for r in label_reads)
    assert all(r.status == 200 for r in label_reads)


def test_token_blob_redirected_to_another_origin_never_sees_authorization(
    registry_token: Registry, fault_proxy: ProxyFactory
) -> None:
    pushed = registry_token.push("public/npa-stored", "v1", labels=LABELLED)
    config = pushed.child("linux/amd64").config
    proxy = fault_proxy(registry_token)
    proxy.redirect("/blobs/", target="other")
    # the other origin answers like an object store: the bytes, no auth asked
    proxy.add(Fault("respond", path="/blobs/", origin="other", status=200, body=config.data))

    report = _preflight(registry_token, [f"{proxy.host}/public/npa-stored:v1"], [proxy.host])

    (row,) = report.rows
    assert row.status is CheckStatus.OK, row.detail
    front = [r for r in proxy.requests if r.origin == "front" and "/blobs/" in r.path]
    moved = [r for r in proxy.requests if r.origin == "other"]
    assert [r.fault for r in front] == ["redirect"]
    assert front[0].authorization is not None and front[0].authorization.startswith("Bearer ")
    assert [(r.path, r.authorization) for r in moved] == [
        (f"/v2/public/npa-stored/blobs/{config.digest}", None)
    ]


def test_blob_digest_lie_is_indeterminate(
    registry_plain: Registry, fault_proxy: ProxyFactory
) -> None:
    registry_plain.push("public/npa-lying", "v1", labels=LABELLED)
    proxy = fault_proxy(registry_plain)
    proxy.respond("/blobs/", 200, body=b'{"config": {"Labels": {}}}')

    report = _preflight(registry_plain, [f"{proxy.host}/public/npa-lying:v1"], [proxy.host])

    (row,) = report.rows
    assert (row.status, row.error_code) == (CheckStatus.PROBE_INDETERMINATE, "DIGEST_MISMATCH")
    assert report.exit_code == 2


def test_client_image_labels_of_the_index_child(registry_plain: Registry) -> None:
    pushed = registry_plain.push(
        "public/npa-direct", "v1", platforms=("linux/arm64", "linux/amd64"), labels={"k": "v"}
    )
    parsed = reference.parse(registry_plain.ref("public/npa-direct", "v1"))
    assert isinstance(parsed, ImageRef)

    with _client(registry_plain) as client:
        checked = client.check_manifest(parsed, LINUX_AMD64)
        read = client.image_labels(parsed, checked)

    assert read.failure is None
    assert (dict(read.labels), read.config_digest) == (
        {"k": "v"},
        pushed.child("linux/amd64").config.digest,
    )


# -- through the SDK: the environment names the trusted registries --------------------------------


@pytest.mark.parametrize(
    ("variable", "trusted"),
    [("NPA_REGISTRY", True), ("NPA_PUBLIC_REGISTRY", True), ("NPA_UNRELATED", False)],
    ids=["npa-registry", "npa-public-registry", "not-trusted"],
)
def test_sdk_preflight_images_trusts_the_environments_registries(
    registry_plain: Registry, tmp_path: Path, variable: str, trusted: bool
) -> None:
    registry_plain.push("public/npa-unlabelled", "v1")
    image = registry_plain.ref("public/npa-unlabelled", "v1")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""\
            apiVersion: npa.workflow/v0.0.1
            kind: Workflow
            metadata: {{name: labels}}
            config: {{bucket: b}}
            resources:
              default: {{cloud: aws, cpus: 1, memory: 1Gi, image: "{image}"}}
            states:
              a:
                run: {{shell: echo a}}
                terminal: true
            """
        ),
        encoding="utf-8",
    )
    # a VM step: the in-cluster pull probe (kubernetes.md §9) leaves the row to the registry
    env = {"NPA_HOME": str(tmp_path), variable: f"{registry_plain.host}/public"}

    with _client(registry_plain) as client:
        report = api.preflight_images(spec, env=env, services=Services(registry=lambda *_: client))

    (row,) = report.rows
    expected = CheckStatus.PROBE_INCOMPATIBLE if trusted else CheckStatus.OK
    assert row.status is expected
    assert report.exit_code == (1 if trusted else 0)
