"""Pod progress controls: what the scheduler and the kubelet would write (kubernetes.md §4, §10.4).

Each control writes through the store (new resourceVersion, a MODIFIED watch
event) and emits the events the real components emit, with their real
reasons and messages, so the supervision and probe code see real shapes.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from tests.support.fakekube import objects, scheduler
from tests.support.fakekube.errors import FakeKubeError
from tests.support.fakekube.store import Store

__all__ = ["PULL_ERRORS", "PodControls"]

Pod = dict[str, Any]


def _split_ref(image: str) -> tuple[str, str, str]:
    """``(registry host, repository path, tag or digest)`` of an image reference."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = digest or (name.rsplit(":", 1)[1] if ":" in last else "latest")
    repo = name.rsplit(":", 1)[0] if ":" in last else name
    first = repo.split("/", 1)[0]
    if "/" in repo and ("." in first or ":" in first or first == "localhost"):
        return first, repo.split("/", 1)[1], tag
    return "registry-1.docker.io", repo if "/" in repo else f"library/{repo}", tag


def _resolve(image: str, tail: str) -> str:
    return (
        f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": {tail}'
    )


def _pull_auth(image: str) -> str:
    host, path, _ = _split_ref(image)
    scope = quote(f"repository:{path}:pull", safe="")
    return "rpc error: code = Unknown desc = " + _resolve(
        image,
        "failed to authorize: failed to fetch anonymous token: unexpected status from GET request "
        f"to https://{host}/token?scope={scope}&service={host}: 401 Unauthorized",
    )


def _pull_status(code: str) -> Callable[[str], str]:
    def render(image: str) -> str:
        host, path, ref = _split_ref(image)
        return "rpc error: code = Unknown desc = " + _resolve(
            image,
            f"unexpected status from HEAD request to https://{host}/v2/{path}/manifests/{ref}: {code}",
        )

    return render


def _pull_timeout(image: str) -> str:
    host, path, ref = _split_ref(image)
    return "rpc error: code = Unknown desc = " + _resolve(
        image,
        f'failed to do request: Head "https://{host}/v2/{path}/manifests/{ref}": '
        "dial tcp 203.0.113.7:443: i/o timeout",
    )


PULL_ERRORS: dict[str, Callable[[str], str]] = {
    "auth": _pull_auth,
    "not_found": lambda image: (
        "rpc error: code = NotFound desc = " + _resolve(image, f"{image}: not found")
    ),
    "timeout": _pull_timeout,
    "rate_limited": _pull_status("429 Too Many Requests"),
    "unavailable": _pull_status("503 Service Unavailable"),
}

_DISRUPTION_MESSAGES = {
    "PreemptionByScheduler": "default-scheduler: preempting to accommodate a higher priority pod",
    "DeletionByTaintManager": "Taint manager: deleting due to NoExecute taint",
    "EvictionByEvictionAPI": "Eviction API: evicting",
    "DeletionByPodGC": "PodGC: node no longer exists",
    "TerminationByKubelet": "Pod was terminated in response to imminent node shutdown.",
}


def _condition(
    type_: str, status: str, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": type_,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": objects.now(),
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _set_condition(status: dict[str, Any], cond: dict[str, Any]) -> None:
    conditions = [c for c in status.get("conditions") or [] if c["type"] != cond["type"]]
    status["conditions"] = [*conditions, cond]


def _container_status(container: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    base = {
        "name": container["name"],
        "image": container["image"],
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {"waiting": {"reason": "ContainerCreating"}},
        "lastState": {},
    }
    return {**base, **(previous or {})}


class PodControls:
    """Pod-side test controls; mixed into ``FakeKube``, which provides ``store``."""

    store: Store

    # -- lookup ------------------------------------------------------------------------------

    def _locate(self, name: str, namespace: str | None) -> tuple[str, Pod]:
        candidates = [
            pod for pod in self.store.items("pods", namespace) if pod["metadata"]["name"] == name
        ]
        if len(candidates) != 1:
            where = namespace or "any namespace"
            raise FakeKubeError(f"{len(candidates)} pods named {name!r} in {where}")
        return candidates[0]["metadata"]["namespace"], candidates[0]

    def pod(self, name: str, namespace: str | None = None) -> Pod:
        """The stored pod (a copy); ``namespace=None`` finds the unique pod of that name."""
        return self._locate(name, namespace)[1]

    def pods(self, namespace: str | None = None) -> list[Pod]:
        return self.store.items("pods", namespace)

    def _status(self, name: str, namespace: str | None, change: Callable[[Pod], None]) -> Pod:
        ns, _ = self._locate(name, namespace)

        def apply(pod: Pod) -> Pod:
            pod.setdefault("status", {})
            change(pod)
            return pod

        return self.store.update("pods", ns, name, apply, subresource="status")

    def _containers(
        self, pod: Pod, container: str | None, init: bool = False
    ) -> list[dict[str, Any]]:
        field = "initContainers" if init else "containers"
        chosen = [c for c in pod["spec"].get(field) or [] if container in (None, c["name"])]
        if not chosen:
            raise FakeKubeError(f"pod {pod['metadata']['name']!r} has no container {container!r}")
        return chosen[:1] if container else chosen

    def _update_containers(
        self, pod: Pod, container: str | None, fields: dict[str, Any], *, init: bool = False
    ) -> None:
        key = "initContainerStatuses" if init else "containerStatuses"
        spec_key = "initContainers" if init else "containers"
        by_name = {s["name"]: s for s in pod["status"].get(key) or []}
        targets = {c["name"] for c in self._containers(pod, container, init)}
        statuses = []
        for spec in pod["spec"].get(spec_key) or []:
            status = _container_status(spec, by_name.get(spec["name"]))
            if spec["name"] in targets:
                status.update(fields)
            statuses.append(status)
        pod["status"][key] = statuses

    # -- events ------------------------------------------------------------------------------

    def add_event(
        self,
        target: str | dict[str, Any],
        reason: str,
        message: str,
        *,
        type_: str = "Warning",
        namespace: str | None = None,
        component: str = "kubelet",
        container: str | None = None,
    ) -> dict[str, Any]:
        """Record a core/v1 Event about a pod (by name) or any stored object (a dict)."""
        involved = self._locate(target, namespace)[1] if isinstance(target, str) else target
        host = (involved.get("spec") or {}).get("nodeName") if component == "kubelet" else None
        event = objects.make_event(
            involved,
            reason=reason,
            message=message,
            type_=type_,
            component=component,
            host=host,
            field_path=f"spec.containers{{{container}}}" if container else None,
        )
        return self.store.create("events", event["metadata"]["namespace"], event)

    def _missing_pull_secrets(self, pod: Pod) -> None:
        ns = pod["metadata"]["namespace"]
        missing = [
            ref["name"]
            for ref in pod["spec"].get("imagePullSecrets") or []
            if self.store.lookup("secrets", ns, ref["name"]) is None
        ]
        if missing:
            self.add_event(
                pod,
                "FailedToRetrieveImagePullSecret",
                f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                "attempting to pull the image may not succeed.",
            )

    # -- generic status ----------------------------------------------------------------------

    def set_pod_phase(
        self,
        name: str,
        phase: str,
        *,
        namespace: str | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> Pod:
        def change(pod: Pod) -> None:
            pod["status"]["phase"] = phase
            for key, value in (("reason", reason), ("message", message)):
                if value is None:
                    pod["status"].pop(key, None)
                else:
                    pod["status"][key] = value

        return self._status(name, namespace, change)

    def set_pod_condition(
        self,
        name: str,
        type_: str,
        status: str,
        *,
        reason: str | None = None,
        message: str | None = None,
        namespace: str | None = None,
    ) -> Pod:
        return self._status(
            name,
            namespace,
            lambda pod: _set_condition(pod["status"], _condition(type_, status, reason, message)),
        )

    def set_container_status(
        self,
        name: str,
        container: str | None = None,
        *,
        state: str = "waiting",
        reason: str | None = None,
        message: str | None = None,
        exit_code: int = 0,
        image_id: str | None = None,
        ready: bool | None = None,
        restart_count: int | None = None,
        init: bool = False,
        namespace: str | None = None,
    ) -> Pod:
        """Set one container's (or every container's) state: ``waiting``, ``running`` or ``terminated``."""
        stamp = objects.now()
        detail: dict[str, Any]
        if state == "waiting":
            detail = {k: v for k, v in (("reason", reason), ("message", message)) if v}
        elif state == "running":
            detail = {"startedAt": stamp}
        elif state == "terminated":
            detail = {
                "exitCode": exit_code,
                "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            }
            detail |= {"startedAt": stamp, "finishedAt": stamp}
            if message:
                detail["message"] = message
        else:
            raise FakeKubeError(f"unknown container state {state!r}")
        fields: dict[str, Any] = {"state": {state: detail}, "started": state == "running"}
        fields["ready"] = bool(ready) if ready is not None else False
        if image_id is not None:
            fields["imageID"] = image_id
        if restart_count is not None:
            fields["restartCount"] = restart_count
        if state != "waiting":
            fields["containerID"] = f"containerd://{secrets.token_hex(32)}"
        return self._status(
            name, namespace, lambda pod: self._update_containers(pod, container, fields, init=init)
        )

    # -- scheduler ---------------------------------------------------------------------------

    def schedule_pod(
        self, name: str, node: str | None = None, *, namespace: str | None = None
    ) -> str | None:
        """Run the scheduler once: bind to ``node`` (or the first fitting node), else mark Unschedulable.

        Returns the node name, or None when the pod is now Unschedulable.
        """
        ns, pod = self._locate(name, namespace)
        nodes = self.store.items("nodes")
        failures = scheduler.fit_failures(pod, nodes, self.store.items("pods"))
        fitting = [n for n, reasons in failures.items() if not reasons]
        chosen = node if node is not None else (fitting[0] if fitting else None)
        if chosen is None:
            self.mark_unschedulable(name, scheduler.unschedulable_message(failures), namespace=ns)
            return None

        def bind(current: Pod) -> Pod:
            current["spec"]["nodeName"] = chosen
            return current

        self.store.update("pods", ns, name, bind, subresource="binding")
        index = (
            sorted(n["metadata"]["name"] for n in nodes).index(chosen) if chosen in failures else 0
        )

        def kubelet(current: Pod) -> None:
            status = current["status"]
            status["hostIP"] = f"10.0.0.{10 + index}"
            status["hostIPs"] = [{"ip": status["hostIP"]}]
            status["startTime"] = objects.now()
            _set_condition(status, _condition("PodReadyToStartContainers", "False"))
            _set_condition(status, _condition("Initialized", "True"))
            _set_condition(
                status,
                _condition(
                    "Ready",
                    "False",
                    "ContainersNotReady",
                    "containers with unready status: ["
                    + " ".join(c["name"] for c in current["spec"]["containers"])
                    + "]",
                ),
            )
            _set_condition(status, _condition("ContainersReady", "False", "ContainersNotReady"))
            _set_condition(status, _condition("PodScheduled", "True"))
            self._update_containers(current, None, {})

        scheduled = self._status(name, ns, kubelet)
        self.add_event(
            scheduled,
            "Scheduled",
            f"Successfully assigned {ns}/{name} to {chosen}",
            type_="Normal",
            component="default-scheduler",
        )
        return chosen

    def mark_unschedulable(
        self, name: str, message: str | None = None, *, namespace: str | None = None
    ) -> Pod:
        """``PodScheduled=False`` reason ``Unschedulable`` (default message: the simulation's) + FailedScheduling."""
        ns, pod = self._locate(name, namespace)
        if message is None:
            failures = scheduler.fit_failures(
                pod, self.store.items("nodes"), self.store.items("pods")
            )
            message = scheduler.unschedulable_message(failures)
        text = message
        updated = self._status(
            name,
            ns,
            lambda p: _set_condition(
                p["status"], _condition("PodScheduled", "False", "Unschedulable", text)
            ),
        )
        self.add_event(updated, "FailedScheduling", text, component="default-scheduler")
        return self.pod(name, ns)

    def disrupt_pod(
        self,
        name: str,
        reason: str = "PreemptionByScheduler",
        *,
        message: str | None = None,
        namespace: str | None = None,
    ) -> Pod:
        """Add ``DisruptionTarget=True`` with one of the upstream reasons (kubernetes.md §4.3)."""
        text = message or _DISRUPTION_MESSAGES.get(reason, reason)
        return self.set_pod_condition(
            name, "DisruptionTarget", "True", reason=reason, message=text, namespace=namespace
        )
