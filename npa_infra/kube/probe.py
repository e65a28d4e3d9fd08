"""``ProbeApi``: the pull probe's pod operations (kubernetes.md §9) through the official client.

A ``KubeApi`` of one exact context, plus the seven calls of ``PodProber``:
the context's namespace, nodes, a ServiceAccount's ``imagePullSecrets``, pod
create, a watch by ``metadata.name`` with ``timeoutSeconds``, a DELETE that
always carries the server-side UID precondition, and a read. Everything
returned is our own ``ProbePod``: the server's JSON for labels and spec
(``ApiClient.sanitize_for_serialization``: camelCase keys, None fields
dropped) and the status signals ``pending`` classifies. Every upstream
failure leaves as a ``KubeError`` through ``failures.translate``; the three
answers the probe branches on are values instead: ``create_pod`` returns
None on 409 ``AlreadyExists``, ``delete_pod`` says ``GONE`` on 404 and
``CONFLICT`` on a 409 precondition failure, ``read_pod`` returns None on 404.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from npa_infra.kube import failures, kubeconfig
from npa_infra.kube.client import KubeApi, pod_observation
from npa_infra.kube.models import DeleteOutcome, KubeErrorKind, ProbePod

if TYPE_CHECKING:
    from kubernetes.client import V1Pod

__all__ = ["ProbeApi", "probe_pod"]

_WATCH_GRACE = 15.0  # the read timeout of a watch exceeds its timeoutSeconds by this much


class ProbeApi(KubeApi):
    """The real ``PodProber`` (and ``KubeCluster``) for one exact context."""

    def __repr__(self) -> str:
        return f"ProbeApi(kubeconfig={str(self.kubeconfig)!r}, context={self.context!r})"

    def namespace(self) -> str:
        """The context's ``namespace``, else ``default``.

        Raises:
            KubeError: ``NO_KUBECONFIG`` or ``UNKNOWN_CONTEXT``.
        """
        return kubeconfig.load(self.kubeconfig).namespace(self.context)

    def service_account_pull_secrets(self, namespace: str, name: str) -> tuple[str, ...] | None:
        """The names in ServiceAccount ``namespace/name``'s ``imagePullSecrets``; None on 404.

        Raises:
            KubeError: any other failure, by kind.
        """
        from kubernetes.client import CoreV1Api

        core = CoreV1Api(self._client())
        try:
            account = core.read_namespaced_service_account(
                name, namespace, _request_timeout=self._request_timeout
            )
        except failures.upstream_errors() as exc:
            if failures.classify(exc) is KubeErrorKind.NOT_FOUND:
                return None
            raise failures.translate(
                exc, context=self.context, operation=f"read serviceaccount {namespace}/{name}"
            ) from exc
        refs = account.image_pull_secrets or []
        return tuple(ref.name for ref in refs if ref.name)

    def create_pod(self, namespace: str, manifest: Mapping[str, object]) -> ProbePod | None:
        """Create the pod; None when its name is taken (409 ``AlreadyExists``).

        Raises:
            KubeError: any other failure (admission 403, quota, transport), by kind.
        """
        from kubernetes.client import CoreV1Api

        api = self._client()
        core = CoreV1Api(api)
        name = _name_of(manifest)
        try:
            created = core.create_namespaced_pod(
                namespace,
                body=dict(manifest),  # type: ignore[arg-type]  # the client sends a dict body as JSON
                _request_timeout=self._request_timeout,
            )
        except failures.upstream_errors() as exc:
            if _status(exc) == 409 and _reason(exc) == "AlreadyExists":
                return None
            raise failures.translate(
                exc, context=self.context, operation=f"create pod {namespace}/{name}"
            ) from exc
        return probe_pod(created, api.sanitize_for_serialization)

    def watch_pod(
        self,
        namespace: str,
        name: str,
        *,
        timeout_seconds: int,
        until: Callable[[ProbePod], bool],
    ) -> ProbePod | None:
        """Watch ``metadata.name=<name>`` for one window of ``timeout_seconds`` (≥ 1).

        Raises:
            KubeError: the watch could not be opened or broke, by kind.
        """
        from kubernetes import watch
        from kubernetes.client import CoreV1Api

        api = self._client()
        core = CoreV1Api(api)
        window = max(1, int(timeout_seconds))
        stream = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes 37 leaves it unannotated
        last: ProbePod | None = None
        try:
            for event in stream.stream(  # type: ignore[no-untyped-call]  # unannotated upstream
                core.list_namespaced_pod,
                namespace,
                field_selector=f"metadata.name={name}",
                timeout_seconds=window,
                _request_timeout=(self._request_timeout, window + _WATCH_GRACE),
            ):
                kind = event.get("type")
                if kind not in ("ADDED", "MODIFIED", "DELETED"):
                    continue  # BOOKMARK
                last = probe_pod(
                    event["object"], api.sanitize_for_serialization, deleted=kind == "DELETED"
                )
                if last.deleted or until(last):
                    stream.stop()  # type: ignore[no-untyped-call]  # unannotated upstream
                    break
        except failures.upstream_errors() as exc:
            raise failures.translate(
                exc, context=self.context, operation=f"watch pod {namespace}/{name}"
            ) from exc
        return last

    def delete_pod(self, namespace: str, name: str, uid: str) -> DeleteOutcome:
        """DELETE ``namespace/name`` only if its UID is still ``uid`` (kubernetes.md §5.3).

        Raises:
            KubeError: anything but 2xx, 404 and 409, by kind.
        """
        from kubernetes.client import CoreV1Api, V1DeleteOptions, V1Preconditions

        if not uid:
            raise failures.kube_error(
                KubeErrorKind.UNEXPECTED,
                f"refusing to delete pod {namespace}/{name} without its UID",
                context=self.context,
            )
        core = CoreV1Api(self._client())
        body = V1DeleteOptions(preconditions=V1Preconditions(uid=uid))
        try:
            core.delete_namespaced_pod(
                name, namespace, body=body, _request_timeout=self._request_timeout
            )
        except failures.upstream_errors() as exc:
            status = _status(exc)
            if status == 404:
                return DeleteOutcome.GONE
            if status == 409:
                return DeleteOutcome.CONFLICT
            raise failures.translate(
                exc, context=self.context, operation=f"delete pod {namespace}/{name} (uid {uid})"
            ) from exc
        return DeleteOutcome.ACCEPTED

    def read_pod(self, namespace: str, name: str) -> ProbePod | None:
        """The pod named ``name`` in ``namespace``; None on 404.

        Raises:
            KubeError: any other failure, by kind.
        """
        from kubernetes.client import CoreV1Api

        api = self._client()
        core = CoreV1Api(api)
        try:
            pod = core.read_namespaced_pod(name, namespace, _request_timeout=self._request_timeout)
        except failures.upstream_errors() as exc:
            if failures.classify(exc) is KubeErrorKind.NOT_FOUND:
                return None
            raise failures.translate(
                exc, context=self.context, operation=f"read pod {namespace}/{name}"
            ) from exc
        return probe_pod(pod, api.sanitize_for_serialization)


def probe_pod(pod: V1Pod, to_json: Callable[[Any], Any], *, deleted: bool = False) -> ProbePod:
    """``V1Pod`` → ``ProbePod``: the server's labels and spec as JSON, plus status signals."""
    metadata, status = pod.metadata, pod.status
    spec = to_json(pod.spec) if pod.spec is not None else {}
    statuses = (status.container_statuses if status is not None else None) or []
    return ProbePod(
        name=(metadata.name if metadata is not None else None) or "",
        namespace=(metadata.namespace if metadata is not None else None) or "",
        uid=(metadata.uid if metadata is not None else None) or "",
        labels=dict((metadata.labels if metadata is not None else None) or {}),
        spec=spec if isinstance(spec, dict) else {},
        phase=(status.phase if status is not None else None) or "Pending",
        image_id=next((s.image_id for s in statuses if s.image_id), ""),
        node_name=(pod.spec.node_name if pod.spec is not None else None) or "",
        deleting=bool(metadata is not None and metadata.deletion_timestamp),
        deleted=deleted,
        observation=pod_observation(pod),
    )


def _name_of(manifest: Mapping[str, object]) -> str:
    metadata = manifest.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and status else None


def _reason(exc: BaseException) -> str:
    """The ``reason`` of an API ``Status`` body (``AlreadyExists``, ``Conflict``…), or ""."""
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str):
        return ""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    return str(parsed.get("reason", "")) if isinstance(parsed, dict) else ""
