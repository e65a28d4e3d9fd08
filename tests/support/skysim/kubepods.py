"""Job pods: a launch creates one pod per task through the Kubernetes API double (§12 "Job pods").

Enabled only when ``$SKYSIM_KUBE_URL`` is set; without it the simulator never
touches the network. The other variables:

- ``SKYSIM_KUBE_TOKEN``: the bearer token (a FakeKube context's user);
- ``SKYSIM_KUBE_CA``: the CA file that verifies the HTTPS server;
- ``SKYSIM_KUBE_NAMESPACE``: where pods are created (default ``default``).

``kube_env(fake, context)`` builds them for a started ``FakeKube`` (test side).

Each task's pod is what SkyPilot 0.12 creates on Kubernetes, reduced to what
supervision reads (kubernetes.md §6.1): named ``<cluster_name_on_cloud>-head``,
labelled ``skypilot-cluster-name=<cluster_name_on_cloud>`` (``<task>-<id>-<user
hash>``, ``jobs.cluster_name_on_cloud``; 0.12's ``-v`` queue rows leave that
field null, so supervision finds the pods by the whole-component job id),
with one ``ray-node`` container running the task's ``resources.image_id``
(``docker:`` stripped; ``--image-id`` overrides) and a ``nvidia.com/gpu``
limit when the task asks for ``NAME:N``. Pods stay
``Pending`` and unbound: the double has no scheduler loop, so tests drive its
native behaviour (``fake.schedule_pod``, ``fake.fail_image_pull``, …) on the
pod, or script a status with the ``pod_state`` launch rule (see ``faults``)::

    {"command": "jobs.launch", "action": "pod_state", "task": 0,
     "pod": {"phase": "Pending",
             "conditions": [{"type": "PodScheduled", "status": "False",
                             "reason": "Unschedulable", "message": "0/1 nodes are available: …"}],
             "waiting": {"reason": "ErrImagePull", "message": "… 401 Unauthorized"},
             "events": [{"reason": "Failed", "message": "Failed to pull image …"}]}}

The status is written through ``pods/<name>/status`` (strategic merge) and the
events are created as core/v1 Warning events about the pod. Each created pod
is recorded in the job's ``pods`` list in the state file (name, namespace, uid
or ``error``); a failed API call never fails the launch.

Stdlib only (``urllib.request``, ``ssl``), imported when a pod is created.
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from tests.support.fakekube import FakeKube

__all__ = ["CA", "LABEL", "NAMESPACE", "TOKEN", "URL", "create_pods", "enabled", "kube_env"]

URL = "SKYSIM_KUBE_URL"
TOKEN = "SKYSIM_KUBE_TOKEN"
CA = "SKYSIM_KUBE_CA"
NAMESPACE = "SKYSIM_KUBE_NAMESPACE"
LABEL = "skypilot-cluster-name"
CONTAINER = "ray-node"
TIMEOUT = 10.0


def enabled(env: Mapping[str, str]) -> bool:
    return bool(env.get(URL))


def kube_env(fake: FakeKube, context: str) -> dict[str, str]:
    """The ``SKYSIM_KUBE_*`` variables for a started ``FakeKube``, as context ``context``'s user."""
    from tests.support.fakekube import kubeconfig

    if context not in fake.contexts:
        raise ValueError(f"{context!r} is not a working FakeKube context: {sorted(fake.contexts)}")
    token = next(t for t, user in kubeconfig.tokens().items() if user == context)
    return {
        URL: fake.url,
        TOKEN: token,
        CA: str(kubeconfig.TLS_DIR / "ca.pem"),
        NAMESPACE: fake.contexts[context],
    }


def _call(env: Mapping[str, str], method: str, path: str, body: Any, content: str) -> Any:
    import ssl
    import urllib.request

    url = env[URL].rstrip("/") + path
    tls = (
        ssl.create_default_context(cafile=env.get(CA) or None) if url.startswith("https") else None
    )
    headers = {"Content-Type": content, "Accept": "application/json"}
    if env.get(TOKEN):
        headers["Authorization"] = f"Bearer {env[TOKEN]}"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method=method, headers=headers
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT, context=tls) as response:
        return json.loads(response.read() or b"{}")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _gpus(accelerators: str | None) -> int:
    """``H100:8`` -> 8, ``H100`` -> 1, none -> 0."""
    if not accelerators:
        return 0
    _, sep, count = str(accelerators).rpartition(":")
    return int(count) if sep and count.strip().isdigit() else 1


def _body(name: str, cluster: str, image: str, gpus: int, user: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINER, "image": image}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {LABEL: cluster, "skypilot-user": user, "parent": "skypilot"},
        },
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def _status(pod: Mapping[str, Any], shape: Mapping[str, Any]) -> dict[str, Any]:
    """The ``status`` patch a ``pod_state`` rule asks for."""
    stamp = _now()
    status: dict[str, Any] = {}
    if shape.get("phase"):
        status["phase"] = str(shape["phase"])
    conditions = []
    for cond in shape.get("conditions") or []:
        item = {"type": str(cond["type"]), "status": str(cond.get("status", "False"))}
        item.update({k: str(cond[k]) for k in ("reason", "message") if cond.get(k)})
        conditions.append({**item, "lastProbeTime": None, "lastTransitionTime": stamp})
    if conditions:
        status["conditions"] = conditions
    waiting = shape.get("waiting")
    if waiting:
        detail = {k: str(waiting[k]) for k in ("reason", "message") if waiting.get(k)}
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"waiting": detail},
            }
            for c in pod["spec"]["containers"]
        ]
    return status


def _event(pod: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    stamp = _now()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{os.urandom(8).hex()}"},
        "involvedObject": {
            "kind": "Pod",
            "apiVersion": "v1",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        },
        "reason": str(event.get("reason", "Failed")),
        "message": str(event.get("message", "")),
        "type": str(event.get("type", "Warning")),
        "source": {"component": str(event.get("component", "kubelet"))},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _shape_pod(env: Mapping[str, str], pod: dict[str, Any], shape: Mapping[str, Any]) -> None:
    meta = pod["metadata"]
    base = f"/api/v1/namespaces/{meta['namespace']}"
    status = _status(pod, shape)
    if status:
        _call(
            env,
            "PATCH",
            f"{base}/pods/{meta['name']}/status",
            {"status": status},
            "application/strategic-merge-patch+json",
        )
    for event in shape.get("events") or []:
        _call(env, "POST", f"{base}/events", _event(pod, event), "application/json")


def create_pods(
    env: Mapping[str, str],
    job: Mapping[str, Any],
    cluster_names: list[str],
    *,
    image_override: str | None = None,
    rule: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One pod per task of ``job`` (``cluster_names[i]`` for task ``i``); returns the records."""
    import urllib.error

    namespace = env.get(NAMESPACE) or "default"
    records: list[dict[str, Any]] = []
    for index, (task, cluster) in enumerate(zip(job["tasks"], cluster_names, strict=True)):
        name = f"{cluster}-head"
        image = (image_override or task.get("image") or "ubuntu:22.04").removeprefix("docker:")
        body = _body(name, cluster, image, _gpus(task.get("accelerators")), job["user_name"])
        record: dict[str, Any] = {"task_id": index, "name": name, "namespace": namespace}
        try:
            pod = _call(
                env, "POST", f"/api/v1/namespaces/{namespace}/pods", body, "application/json"
            )
            record["uid"] = pod["metadata"]["uid"]
            wanted = rule.get("task") if rule else None
            if rule and rule.get("pod") and wanted in (None, index):
                _shape_pod(env, pod, rule["pod"])
        except urllib.error.HTTPError as error:
            record["error"] = f"HTTP {error.code}: {error.read().decode('utf-8', 'replace')[:300]}"
        except (OSError, ValueError, KeyError) as error:  # URLError is an OSError
            record["error"] = f"{type(error).__name__}: {error}"
        records.append(record)
    return records
