"""The probe pod's manifest and the identity comparison (kubernetes.md §9.2, §9.3); pure."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given

from npa_infra.errors import InvariantError
from npa_infra.kube.models import ProbePod
from npa_infra.testing.kube import DEFAULT_TOLERATIONS
from preflight import probe_pod
from preflight.probe_paths import Placement, ProbePath
from tests import strategies

DIGEST = "sha256:" + "a" * 64
IMAGE = f"reg.example.com/team/app@{DIGEST}"
CONTRACT = "skypilot-0.12.2-v1"
NONCE = "0123456789abcdef"
PLACEMENT = Placement(
    '{"nodeSelector":{"pool":"gpu"},"tolerations":[{"key":"t","operator":"Exists"}]}',
    (("kueue.x-k8s.io/queue-name", "q"),),
)
PATH = ProbePath("ctx", "team-a", "job-sa", ("regcred",), PLACEMENT)


def _manifest(path: ProbePath = PATH) -> dict[str, Any]:
    return probe_pod.manifest(
        path, image=IMAGE, digest=DIGEST, nonce=NONCE, run_id="run-1", contract=CONTRACT
    )


@given(strategies.hex_texts(64), strategies.hex_texts(16))
def test_pod_name_shape_and_length(hexdigest: str, nonce: str) -> None:
    name = probe_pod.pod_name(f"sha256:{hexdigest}", nonce, CONTRACT)

    assert re.fullmatch(r"npa-image-pull-preflight-[0-9a-f]{10}-[0-9a-f]{16}", name)
    assert len(name) <= 63 and name.endswith(nonce)


@pytest.mark.parametrize(
    "nonce",
    ["", "0123", "0123456789ABCDEF", "0123456789abcdeg", "0123456789abcdef0"],
    ids=["empty", "short", "uppercase", "not-hex", "long"],
)
def test_pod_name_bad_nonce_is_an_invariant_error(nonce: str) -> None:
    with pytest.raises(InvariantError):
        probe_pod.pod_name(DIGEST, nonce, CONTRACT)


def test_manifest_shape_kubernetes_md_9_2() -> None:
    body = _manifest()

    meta, spec = body["metadata"], body["spec"]
    assert meta["name"] == probe_pod.pod_name(DIGEST, NONCE, CONTRACT)
    assert meta["namespace"] == "team-a"
    assert meta["labels"] == {
        "kueue.x-k8s.io/queue-name": "q",
        "npa.nebius.com/owned": "true",
        "npa.nebius.com/purpose": "image-pull-preflight",
        "npa.nebius.com/probe-id": NONCE,
    }
    assert meta["annotations"][probe_pod.ANNOTATION_RUN_ID] == "run-1"
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "job-sa"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == {"pool": "gpu"}
    (container,) = spec["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (IMAGE, "Always")
    assert container["command"][:2] == ["/bin/sh", "-c"]
    assert container["command"][3:] == ["npa-probe", *probe_pod.SCRIPT_ARGS]
    assert "nvidia.com/gpu" not in str(container["resources"])


def test_manifest_without_requested_secrets_leaves_the_list_out() -> None:
    body = _manifest(ProbePath("ctx", "ns", "sa", (), Placement()))
    assert "imagePullSecrets" not in body["spec"]


def test_manifest_refuses_an_image_not_by_digest() -> None:
    with pytest.raises(InvariantError):
        probe_pod.manifest(
            PATH,
            image="reg.example.com/team/app:v1",
            digest=DIGEST,
            nonce=NONCE,
            run_id="r",
            contract=CONTRACT,
        )


def test_script_checks_every_bootstrap_capability() -> None:
    script = probe_pod.SCRIPT
    for needle in ("/tmp", "HOME", "rsync", "service", "sshd", "sudo -n true", '"$#" -eq 2'):
        assert needle in script


def _observed(body: dict[str, Any], **spec_changes: Any) -> ProbePod:
    """The pod as admission would return it: SA secrets kept, default tolerations added."""
    spec = copy.deepcopy(body["spec"])
    spec["tolerations"] = [*spec.get("tolerations", []), *DEFAULT_TOLERATIONS]
    spec.update(spec_changes)
    return ProbePod(
        name=body["metadata"]["name"],
        namespace="team-a",
        uid="u-1",
        labels=dict(body["metadata"]["labels"]),
        spec=spec,
    )


def test_identity_kept_when_only_admission_defaults_differ() -> None:
    body = _manifest()
    pod = _observed(body, nodeName="node-7", priority=0)

    assert probe_pod.identity_drift(body, pod, expected_pull_secrets=("regcred",)) == ()


def _container(body: dict[str, Any], **changes: Any) -> list[dict[str, Any]]:
    return [{**body["spec"]["containers"][0], **changes}]


@pytest.mark.parametrize(
    ("changes", "expected", "needle"),
    [
        ({"serviceAccountName": "default"}, ("regcred",), "serviceAccountName"),
        ({}, ("other",), "imagePullSecrets"),
        (
            {"imagePullSecrets": [{"name": "regcred"}, {"name": "x"}]},
            ("regcred",),
            "imagePullSecrets",
        ),
        ({"nodeSelector": {"pool": "gpu", "runtime": "nvidia"}}, ("regcred",), "nodeSelector"),
        (
            {"tolerations": [{"key": "t", "operator": "Exists"}, {"key": "extra"}]},
            ("regcred",),
            "tolerations",
        ),
        (
            {
                "tolerations": [
                    {"key": "t", "operator": "Exists"},
                    {**DEFAULT_TOLERATIONS[0], "value": "x"},
                ]
            },
            ("regcred",),
            "tolerations",
        ),
        ({"priorityClassName": "default-high"}, ("regcred",), "priorityClassName"),
        ({"runtimeClassName": "kata"}, ("regcred",), "runtimeClassName"),
    ],
    ids=[
        "service-account",
        "secrets-not-the-accounts",
        "extra-secret-merged",
        "runtime-class-node-selector",
        "extra-toleration",
        "default-toleration-with-extra-field",
        "priority-class-defaulted",
        "runtime-class-set",
    ],
)
def test_identity_drift_table(
    changes: dict[str, Any], expected: tuple[str, ...], needle: str
) -> None:
    body = _manifest()
    pod = _observed(body)
    pod = ProbePod(pod.name, pod.namespace, pod.uid, pod.labels, {**pod.spec, **changes})

    drift = probe_pod.identity_drift(body, pod, expected_pull_secrets=expected)

    assert drift and any(line.startswith(needle) for line in drift), drift


@pytest.mark.parametrize(
    ("container", "needle"),
    [
        ({"imagePullPolicy": "IfNotPresent"}, "imagePullPolicy"),
        ({"image": "reg.example.com/team/app:v1"}, "image:"),
    ],
    ids=["pull-policy", "image-rewritten"],
)
def test_identity_drift_container(container: dict[str, Any], needle: str) -> None:
    body = _manifest()
    base = _observed(body)
    pod = ProbePod(
        base.name,
        base.namespace,
        base.uid,
        base.labels,
        {**base.spec, "containers": _container(body, **container)},
    )

    drift = probe_pod.identity_drift(body, pod, expected_pull_secrets=("regcred",))

    assert any(line.startswith(needle) for line in drift), drift


def test_identity_drift_create_response_name_uid_and_labels() -> None:
    body = _manifest()
    base = _observed(body)
    pod = ProbePod("other-name", base.namespace, "", {"npa.nebius.com/owned": "true"}, base.spec)

    drift = probe_pod.identity_drift(body, pod, expected_pull_secrets=("regcred",))

    assert drift[0].startswith("name:")
    assert "the API returned no uid" in drift
    assert any(line.startswith("label npa.nebius.com/purpose") for line in drift)


def test_identity_requested_node_name_is_compared() -> None:
    path = ProbePath("ctx", "ns", "sa", (), Placement('{"nodeName":"n1"}'))
    body = _manifest(path)
    pod = _observed(body, nodeName="n2")

    drift = probe_pod.identity_drift(body, pod, expected_pull_secrets=())

    assert any(line.startswith("nodeName") for line in drift)
