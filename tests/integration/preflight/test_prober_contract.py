"""One contract for both ``PodProber``s (style.md rule 5): ``FakePodProber`` and ``ProbeApi``.

The real adapter runs against the Kubernetes API double through the official
client; the fake runs in memory. Both must answer the probe's branches the
same way: ServiceAccount secrets or None, admission copying those secrets
only into an empty list, ``AlreadyExists`` as None, a UID-preconditioned
DELETE that never removes another object (``CONFLICT``), ``GONE`` and a None
read for what does not exist. Failures of the real one are ``KubeError``s,
never client exceptions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from npa_infra.errors import KubeError
from npa_infra.kube.base import PodProber
from npa_infra.kube.models import DeleteOutcome, KubeErrorKind
from npa_infra.kube.probe import ProbeApi
from npa_infra.testing.kube import FakePodProber
from tests.support.fakekube import FakeKube

NS = "team-a"
SA = "skypilot-service-account"


def _pod(name: str, *, secrets: tuple[str, ...] = (), account: str = SA) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serviceAccountName": account,
        "restartPolicy": "Never",
        "containers": [{"name": "probe", "image": "reg.example.com/a@sha256:" + "a" * 64}],
    }
    if secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in secrets]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.fixture(params=["fake", "real"])
def prober(request: pytest.FixtureRequest, fake_kube: FakeKube) -> Iterator[PodProber]:
    if request.param == "fake":
        yield FakePodProber("fake-a", namespace=NS, service_accounts={SA: ("regcred", "other")})
        return
    fake_kube.add_service_account(NS, SA, image_pull_secrets=["regcred", "other"])
    with ProbeApi(fake_kube.kubeconfig, "fake-a") as real:
        yield real


def _secrets(spec: Any) -> list[str]:
    return [ref["name"] for ref in spec.get("imagePullSecrets") or []]


def test_contract_namespace_is_the_contexts(prober: PodProber) -> None:
    assert prober.namespace() == NS


def test_contract_service_account_secrets_in_order_or_none(prober: PodProber) -> None:
    assert prober.service_account_pull_secrets(NS, SA) == ("regcred", "other")
    assert prober.service_account_pull_secrets(NS, "missing") is None


def test_contract_create_copies_account_secrets_only_into_an_empty_list(
    prober: PodProber,
) -> None:
    inherited = prober.create_pod(NS, _pod("p-inherit"))
    own = prober.create_pod(NS, _pod("p-own", secrets=("mine",)))

    assert inherited is not None and own is not None
    assert _secrets(inherited.spec) == ["regcred", "other"]
    assert _secrets(own.spec) == ["mine"]
    assert inherited.uid and inherited.uid != own.uid
    tolerations = {t["key"] for t in inherited.spec["tolerations"]}  # type: ignore[attr-defined]  # JSON list
    assert tolerations == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


def test_contract_duplicate_name_is_none(prober: PodProber) -> None:
    assert prober.create_pod(NS, _pod("p-dup")) is not None
    assert prober.create_pod(NS, _pod("p-dup")) is None


def test_contract_missing_account_is_a_forbidden_kube_error(prober: PodProber) -> None:
    with pytest.raises(KubeError) as info:
        prober.create_pod(NS, _pod("p-none", account="missing"))

    assert info.value.details["kind"] == KubeErrorKind.FORBIDDEN.value
    message = info.value.message.replace('\\"', '"')  # the real one quotes the Status body
    assert 'serviceaccount "missing" not found' in message


def test_contract_delete_with_uid_precondition(prober: PodProber) -> None:
    created = prober.create_pod(NS, _pod("p-del"))
    assert created is not None

    assert prober.delete_pod(NS, "p-del", "another-uid") is DeleteOutcome.CONFLICT
    kept = prober.read_pod(NS, "p-del")
    assert kept is not None and kept.uid == created.uid  # never deleted by name
    assert prober.delete_pod(NS, "p-del", created.uid) is DeleteOutcome.ACCEPTED
    assert prober.read_pod(NS, "p-del") is None
    assert prober.delete_pod(NS, "p-del", created.uid) is DeleteOutcome.GONE


def test_contract_read_missing_is_none(prober: PodProber) -> None:
    assert prober.read_pod(NS, "never") is None


def test_contract_watch_returns_the_pod_and_stops_on_until(prober: PodProber) -> None:
    created = prober.create_pod(NS, _pod("p-watch"))
    assert created is not None

    seen = prober.watch_pod(NS, "p-watch", timeout_seconds=5, until=lambda p: True)

    assert seen is not None and seen.uid == created.uid and not seen.deleted


# -- the real adapter's failures are translated at the boundary ----------------------------------


@pytest.mark.parametrize(
    ("context", "kind"),
    [
        ("forbidden", KubeErrorKind.FORBIDDEN),
        ("bad-token", KubeErrorKind.AUTH),
        ("unreachable", KubeErrorKind.TRANSPORT),
    ],
    ids=["forbidden-403", "bad-token-401", "unreachable-refused"],
)
def test_real_adapter_failures_are_kube_errors(
    fake_kube: FakeKube, context: str, kind: KubeErrorKind
) -> None:
    with ProbeApi(fake_kube.kubeconfig, context) as api, pytest.raises(KubeError) as info:
        api.create_pod("default", _pod("p-x"))

    assert info.value.details["kind"] == kind.value


def test_real_adapter_server_error_on_delete_is_a_transient_kube_error(
    fake_kube: FakeKube,
) -> None:
    fake_kube.add_service_account(NS, SA)
    with ProbeApi(fake_kube.kubeconfig, "fake-a") as api:
        created = api.create_pod(NS, _pod("p-500"))
        assert created is not None
        fake_kube.fail_next("DELETE", "/pods/p-500", 500)
        with pytest.raises(KubeError) as info:
            api.delete_pod(NS, "p-500", created.uid)

    assert info.value.details["kind"] == KubeErrorKind.SERVER.value


def test_real_adapter_refuses_to_delete_without_a_uid(fake_kube: FakeKube) -> None:
    with ProbeApi(fake_kube.kubeconfig, "fake-a") as api, pytest.raises(KubeError):
        api.delete_pod(NS, "anything", "")

    assert fake_kube.calls("DELETE") == []
