"""Kubelet-side pod controls: pulls, config errors, start, exit, crash loops (kubernetes.md §2.3, §4.1, §4.4).

Waiting reasons and event texts are the kubelet's: ``ErrImagePull`` and
``ImagePullBackOff`` carry the runtime's pull error, a missing Secret or
ConfigMap gives ``CreateContainerConfigError`` with ``secret "x" not found``
and the event ``Error: secret "x" not found``, and a referenced pull Secret
that does not exist gives ``FailedToRetrieveImagePullSecret``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tests.support.fakekube import objects
from tests.support.fakekube.errors import FakeKubeError
from tests.support.fakekube.pods import PULL_ERRORS, Pod, PodControls, _condition, _set_condition

__all__ = ["KubeletControls"]


def _config_refs(container: dict[str, Any]) -> list[tuple[str, str]]:
    """``(kind, name)`` of the non-optional Secrets and ConfigMaps a container's env needs."""
    refs = []
    for env in container.get("env") or []:
        source = env.get("valueFrom") or {}
        for key, kind in (("secretKeyRef", "secret"), ("configMapKeyRef", "configmap")):
            ref = source.get(key)
            if ref and not ref.get("optional"):
                refs.append((kind, ref.get("name", "")))
    for env_from in container.get("envFrom") or []:
        for key, kind in (("secretRef", "secret"), ("configMapRef", "configmap")):
            ref = env_from.get(key)
            if ref and not ref.get("optional"):
                refs.append((kind, ref.get("name", "")))
    return refs


class KubeletControls(PodControls):
    """What the kubelet would report for a bound pod."""

    def _ensure_bound(self, name: str, namespace: str | None) -> Pod:
        ns, pod = self._locate(name, namespace)
        if not pod["spec"].get("nodeName") and self.schedule_pod(name, namespace=ns) is None:
            raise FakeKubeError(f"pod {name!r} is unschedulable; cannot run it")
        return self.pod(name, ns)

    def _missing_config(self, pod: Pod) -> list[tuple[str, str, str]]:
        ns = pod["metadata"]["namespace"]
        missing = []
        for container in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
            for kind, ref in _config_refs(container):
                resource = "secrets" if kind == "secret" else "configmaps"
                if self.store.lookup(resource, ns, ref) is None:
                    missing.append((container["name"], kind, ref))
        return missing

    def fail_image_pull(
        self,
        name: str,
        kind: str = "auth",
        *,
        message: str | None = None,
        backoff: bool = False,
        container: str | None = None,
        namespace: str | None = None,
    ) -> Pod:
        """Pull failure: ``ErrImagePull`` (or ``ImagePullBackOff`` with ``backoff``).

        ``kind`` picks a realistic containerd error: auth (401), not_found,
        timeout, rate_limited (429), unavailable (503); ``message`` overrides it.
        """
        pod = self._ensure_bound(name, namespace)
        ns = pod["metadata"]["namespace"]
        self._missing_pull_secrets(pod)
        for spec in self._containers(pod, container):
            image = spec["image"]
            if message is None and kind not in PULL_ERRORS:
                raise FakeKubeError(
                    f"unknown pull failure kind {kind!r}; one of {sorted(PULL_ERRORS)}"
                )
            error = message if message is not None else PULL_ERRORS[kind](image)
            self.add_event(
                pod, "Pulling", f'Pulling image "{image}"', type_="Normal", container=spec["name"]
            )
            self.add_event(
                pod, "Failed", f'Failed to pull image "{image}": {error}', container=spec["name"]
            )
            self.add_event(pod, "Failed", "Error: ErrImagePull", container=spec["name"])
            reason, text = "ErrImagePull", error
            if backoff:
                reason, text = (
                    "ImagePullBackOff",
                    f'Back-off pulling image "{image}": ErrImagePull: {error}',
                )
                self.add_event(
                    pod,
                    "BackOff",
                    f'Back-off pulling image "{image}"',
                    type_="Normal",
                    container=spec["name"],
                )
                self.add_event(pod, "Failed", "Error: ImagePullBackOff", container=spec["name"])
            self.set_container_status(name, spec["name"], reason=reason, message=text, namespace=ns)
        return self.pod(name, ns)

    def fail_container_config(
        self,
        name: str,
        ref: str = "x",
        *,
        kind: str = "secret",
        container: str | None = None,
        namespace: str | None = None,
    ) -> Pod:
        """``CreateContainerConfigError`` for a missing Secret (or ``kind="configmap"``)."""
        pod = self._ensure_bound(name, namespace)
        ns = pod["metadata"]["namespace"]
        text = f'{kind} "{ref}" not found'
        for spec in self._containers(pod, container):
            self.add_event(pod, "Failed", f"Error: {text}", container=spec["name"])
            self.set_container_status(
                name, spec["name"], reason="CreateContainerConfigError", message=text, namespace=ns
            )
        return self.pod(name, ns)

    def start_pod(
        self,
        name: str,
        *,
        image_id: str | None = None,
        runtime: str = "containerd",
        namespace: str | None = None,
    ) -> Pod:
        """Pull, create and start every container: phase Running, Ready.

        Binds the pod first if needed. A missing non-optional Secret or
        ConfigMap in ``env``/``envFrom`` gives ``CreateContainerConfigError``
        instead, as the kubelet would. ``image_id`` defaults to the pulled
        image's digest (``runtime="docker"`` adds ``docker-pullable://``).
        """
        pod = self._ensure_bound(name, namespace)
        ns = pod["metadata"]["namespace"]
        self._missing_pull_secrets(pod)
        missing = self._missing_config(pod)
        if missing:
            container, kind, ref = missing[0]
            return self.fail_container_config(
                name, ref, kind=kind, container=container, namespace=ns
            )
        for init in pod["spec"].get("initContainers") or []:
            self.set_container_status(
                name,
                init["name"],
                state="terminated",
                exit_code=0,
                init=True,
                namespace=ns,
                image_id=objects.image_id_for(init["image"], runtime),
            )
        for spec in pod["spec"]["containers"]:
            image = spec["image"]
            self.add_event(
                pod, "Pulling", f'Pulling image "{image}"', type_="Normal", container=spec["name"]
            )
            self.add_event(
                pod,
                "Pulled",
                f'Successfully pulled image "{image}" in 1.204s (1.204s including waiting). Image size: 52428800 bytes.',
                type_="Normal",
                container=spec["name"],
            )
            self.add_event(
                pod,
                "Created",
                f"Created container: {spec['name']}",
                type_="Normal",
                container=spec["name"],
            )
            self.add_event(
                pod,
                "Started",
                f"Started container {spec['name']}",
                type_="Normal",
                container=spec["name"],
            )
            self.set_container_status(
                name,
                spec["name"],
                state="running",
                ready=True,
                image_id=image_id or objects.image_id_for(image, runtime),
                namespace=ns,
            )

        def running(current: Pod) -> None:
            status = current["status"]
            status["phase"] = "Running"
            status["podIP"] = "10.244.0.17"
            status["podIPs"] = [{"ip": "10.244.0.17"}]
            for cond in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ):
                _set_condition(status, _condition(cond, "True"))

        return self._status(name, ns, running)

    def _finish(
        self,
        name: str,
        namespace: str | None,
        exit_code: int,
        reason: str | None,
        message: str | None,
    ) -> Pod:
        pod = self.pod(name, namespace)
        if pod["status"].get("phase") != "Running":
            pod = self.start_pod(name, namespace=namespace)
        ns = pod["metadata"]["namespace"]
        for spec in pod["spec"]["containers"]:
            self.set_container_status(
                name,
                spec["name"],
                state="terminated",
                exit_code=exit_code,
                reason=reason,
                message=message,
                namespace=ns,
            )
        phase = "Succeeded" if exit_code == 0 else "Failed"

        def done(current: Pod) -> None:
            status = current["status"]
            status["phase"] = phase
            for cond in ("Ready", "ContainersReady"):
                _set_condition(status, _condition(cond, "False", "PodCompleted"))
            _set_condition(status, _condition("PodReadyToStartContainers", "False"))

        return self._status(name, ns, done)

    def succeed_pod(self, name: str, *, namespace: str | None = None) -> Pod:
        """Every container exits 0: phase Succeeded (started first if needed)."""
        return self._finish(name, namespace, 0, "Completed", None)

    def fail_pod(
        self,
        name: str,
        exit_code: int = 1,
        *,
        reason: str = "Error",
        message: str | None = None,
        namespace: str | None = None,
    ) -> Pod:
        """Every container exits non-zero: phase Failed (``restartPolicy: Never`` semantics)."""
        if exit_code == 0:
            raise FakeKubeError("fail_pod needs a non-zero exit code; use succeed_pod")
        return self._finish(name, namespace, exit_code, reason, message)

    def crash_loop(
        self,
        name: str,
        *,
        exit_code: int = 1,
        restarts: int = 3,
        container: str | None = None,
        namespace: str | None = None,
    ) -> Pod:
        """``CrashLoopBackOff`` with the last termination's exit code and a restart count."""
        pod = self.pod(name, namespace)
        if pod["status"].get("phase") != "Running":
            pod = self.start_pod(name, namespace=namespace)
        ns, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
        stamp = objects.now()
        for spec in self._containers(pod, container):
            cname = spec["name"]
            fields = {
                "state": {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off 40s restarting failed container={cname} pod={name}_{ns}({uid})",
                    }
                },
                "lastState": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Error",
                        "startedAt": stamp,
                        "finishedAt": stamp,
                    }
                },
                "ready": False,
                "started": False,
                "restartCount": restarts,
            }
            self._status(name, ns, partial(self._update_containers, container=cname, fields=fields))
            self.add_event(
                pod,
                "BackOff",
                f"Back-off restarting failed container {cname} in pod {name}_{ns}({uid})",
                container=cname,
            )
        return self._status(
            name,
            ns,
            lambda p: _set_condition(
                p["status"], _condition("Ready", "False", "ContainersNotReady")
            ),
        )

    def finish_pod_deletion(self, name: str, *, namespace: str | None = None) -> None:
        """The kubelet confirms a terminating pod is gone (with ``graceful_pod_deletion``)."""
        ns, _ = self._locate(name, namespace)
        self.store.remove("pods", ns, name)
