"""Render plan steps to SkyPilot 0.12 task documents (dsl.md §6.1, skypilot-0.12.md §10).

Pure: the caller passes the settings (images, source URI, secret names, GPU
overrides from the environment); the result is plain dictionaries in the key
order SkyPilot documents. Secret values never enter a document: secrets are
declared by name with a ``<NAME>`` placeholder and supplied at launch through
``--secret NAME`` from the launching process's environment.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from npa_infra.catalog import images as pins
from npa_infra.errors import RenderError
from npa_infra.plan.model import PlanStep
from npa_infra.render import images

__all__ = ["RenderSettings", "render_task", "secret_names_for_image", "task_pod_config"]

DEFAULT_AWS_ENDPOINT = "https://storage.eu-north1.nebius.cloud"
_NEBIUS_REGISTRY = re.compile(r"^cr\.[a-z0-9-]+\.nebius\.cloud/")
_COPIED = ("cloud", "accelerators", "cpus", "memory", "disk_size", "use_spot", "region")
_DOCKER_SECRETS = ("SKYPILOT_DOCKER_SERVER", "SKYPILOT_DOCKER_USERNAME", "SKYPILOT_DOCKER_PASSWORD")
_NEBIUS_PULL_SECRET = "npa-nebius-registry"
_CACHE_DEFAULTS = {"XDG_CACHE_HOME": "/tmp/npa-cache/xdg", "UV_CACHE_DIR": "/tmp/npa-cache/uv"}


@dataclass(frozen=True, slots=True)
class RenderSettings:
    workflow: str
    run_id: str
    config: Mapping[str, Any]
    selection: images.ImageSelection = field(default_factory=images.ImageSelection)
    secret_env: Sequence[str] = ()
    src_s3_uri: str = ""
    accept_eula: bool = True
    gpu_accelerator: str = ""
    gpu_memory: str = ""
    aws_endpoint: str = DEFAULT_AWS_ENDPOINT
    fence_sequence: int = 1
    fence_attempt: int = 1


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def secret_names_for_image(image: str | None) -> tuple[str, ...]:
    """Registry credentials SkyPilot needs for a private Nebius registry image."""
    return _DOCKER_SECRETS if image and _NEBIUS_REGISTRY.match(image) else ()


def _accelerators(raw: object, override: str) -> str | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, dict):
        if not raw:
            return None
        name, count = next(iter(raw.items()))
        text = f"{name}:{count}"
    else:
        text = str(raw)
    if override:
        if ":" in override:
            return override
        count = text.rsplit(":", 1)[1] if ":" in text else "1"
        return f"{override}:{count}"
    return text


def _strip_memory(value: object) -> str:
    text = str(value).strip()
    for suffix in ("Gi", "G"):
        if text.endswith(suffix):
            return text[: -len(suffix)]
    return text


def _resources(
    step: PlanStep,
    profile: Mapping[str, Any],
    image: str | None,
    s: RenderSettings,
    pod_config: dict[str, Any],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    k8s = str(profile.get("cloud", "")).lower() == "kubernetes"
    for key in _COPIED:
        if key not in profile or profile[key] in (None, ""):
            continue
        value = profile[key]
        if key == "accelerators":
            acc = _accelerators(value, s.gpu_accelerator)
            if acc:
                out[key] = acc
            continue
        if key == "memory":
            value = _strip_memory(value)
            if s.gpu_memory and profile.get("accelerators"):
                value = _strip_memory(s.gpu_memory)
        if key == "disk_size":
            if k8s:
                # SkyPilot 0.12.2's resources schema has no ephemeral-storage key;
                # the pod_config request is the spelling it does accept.
                _ensure_container(pod_config)["resources"] = {
                    **_ensure_container(pod_config).get("resources", {}),
                    "requests": {
                        **_ensure_container(pod_config).get("resources", {}).get("requests", {}),
                        "ephemeral-storage": f"{_strip_memory(value)}Gi",
                    },
                }
            continue
        if k8s and key in ("cpus", "memory"):
            text = str(value)
            value = text if text.endswith("+") else f"{text}+"
        out[key] = value
    if image:
        out["image_id"] = f"docker:{image}"
    return out


def _ensure_container(pod_config: dict[str, Any]) -> dict[str, Any]:
    spec = pod_config.setdefault("spec", {})
    containers = spec.setdefault("containers", [])
    for container in containers:
        if isinstance(container, dict) and container.get("name", "ray-node") == "ray-node":
            return container
    container = {"name": "ray-node"}
    containers.append(container)
    return container


def _pod_env_names(pod_config: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for container in (pod_config.get("spec") or {}).get("containers") or []:
        if isinstance(container, dict):
            for env in container.get("env") or []:
                if isinstance(env, dict) and "name" in env:
                    names.add(str(env["name"]))
    return names


def _runs_as_root(pod_config: Mapping[str, Any]) -> bool:
    spec = pod_config.get("spec") or {}
    if (spec.get("securityContext") or {}).get("runAsUser") == 0:
        return True
    return any(
        isinstance(c, dict) and (c.get("securityContext") or {}).get("runAsUser") == 0
        for c in spec.get("containers") or []
    )


def _is_first_party(image: str, registry: str) -> bool:
    head = image.split("@", 1)[0].rsplit(":", 1)[0] if "@" in image else image.rsplit(":", 1)[0]
    name = head.rsplit("/", 1)[-1]
    return head.startswith(registry.rstrip("/") + "/") or name in pins.IMAGE_PINS


def _add_pull_secret(pod_config: dict[str, Any], image: str | None) -> None:
    """A private Nebius registry image pulls with the stack's ``npa-nebius-registry`` Secret."""
    if image and secret_names_for_image(image):
        pull = pod_config.setdefault("spec", {}).setdefault("imagePullSecrets", [])
        if not any(isinstance(p, dict) and p.get("name") == _NEBIUS_PULL_SECRET for p in pull):
            pull.append({"name": _NEBIUS_PULL_SECRET})


def task_pod_config(profile: Mapping[str, Any], image: str | None) -> dict[str, Any]:
    """The task layer's ``config.kubernetes.pod_config`` as ``render_task`` emits it.

    Without the resource requests ``render_task`` may add (ephemeral storage):
    the pull probe needs the pod's identity and placement, never its size.
    """
    raw = profile.get("kubernetes")
    block: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    pod_config: dict[str, Any] = copy.deepcopy(block.get("pod_config") or {})
    _add_pull_secret(pod_config, image)
    return pod_config


def attempt_id(workflow: str, run_id: str, task: str) -> str:
    return hashlib.sha256(json.dumps([workflow, run_id, task]).encode()).hexdigest()


def _envs(
    step: PlanStep,
    name: str,
    image: str | None,
    s: RenderSettings,
    pod_config: Mapping[str, Any],
    k8s: bool,
) -> dict[str, str]:
    envs = {
        "NPA_WORKFLOW_NAME": s.workflow,
        "NPA_WORKFLOW_RUN_ID": s.run_id,
        "NPA_WORKFLOW_STATE": step.state,
        "NPA_WORKFLOW_ATTEMPT_ID": attempt_id(s.workflow, s.run_id, name),
        "NPA_WORKFLOW_FENCE_SEQUENCE": str(s.fence_sequence),
        "NPA_WORKFLOW_FENCE_ATTEMPT": str(s.fence_attempt),
        "AWS_ENDPOINT_URL": str(s.config.get("aws_endpoint_url") or s.aws_endpoint),
    }
    if image:
        envs["NPA_TASK_IMAGE"] = image
    if s.src_s3_uri:
        envs["NPA_SRC_S3_URI"] = s.src_s3_uri
    if _truthy(s.config.get("source_overlay")):
        envs["NPA_SRC_OVERLAY"] = "1"
    if str(s.config.get("source_sha") or ""):
        envs["NPA_SIM2REAL_SOURCE_SHA"] = str(s.config["source_sha"])
    # npa-infra adds: the declared checkpoint location and loader (runs/checkpoints.py),
    # loaded only for a step that declares one (issue 19: a plan without stays light)
    if step.checkpoint_uri or step.checkpoint_loader:
        from npa_infra.runs import checkpoints

        if step.checkpoint_uri:
            envs[checkpoints.DECLARED_URI] = step.checkpoint_uri
        if step.checkpoint_loader:
            envs[checkpoints.DECLARED_LOADER] = step.checkpoint_loader
    isaac = "isaac" in step.tool_ref or bool(image and "isaac" in image)
    if isaac and s.accept_eula:
        envs["ACCEPT_EULA"] = "Y"
    if image and k8s:
        explicit = _pod_env_names(pod_config)
        for key, value in _CACHE_DEFAULTS.items():
            if key not in explicit:
                envs[key] = value
    return envs


def _run_script(step: PlanStep) -> str:
    if step.argv:
        command = "exec " + shlex.join(step.argv)
    else:
        command = "exec bash -c " + shlex.quote(step.shell)
    return "\n".join(
        (
            "set -euo pipefail",
            'set +u; for f in /etc/profile.d/*.sh; do [ -r "$f" ] && . "$f"; done; set -u',
            'NPA_PYTHON="$(cat /tmp/npa-python 2>/dev/null || command -v python3)"',
            'python3() { "$NPA_PYTHON" "$@"; }',
            'npa() { "$NPA_PYTHON" -m npa.cli.main "$@"; }',
            "export -f python3 npa",
            'if [ -d /tmp/npa-src ]; then export PYTHONPATH="/tmp/npa-src${PYTHONPATH:+:$PYTHONPATH}"; fi',
            command,
            "",
        )
    )


def _setup_script(s: RenderSettings) -> str:
    baked = _truthy(s.config.get("require_baked_npa"))
    module = str(s.config.get("baked_npa_import") or "npa.cli.main")
    if baked:
        body = [
            "set -euo pipefail",
            f'python3 -c "import {module}" || {{ echo "baked image lacks {module}" >&2; exit 1; }}',
        ]
    else:
        body = [
            "set -euo pipefail",
            'if ! python3 -c "import npa" 2>/dev/null || [ "${NPA_SRC_OVERLAY:-0}" = 1 ]; then',
            '  if [ -n "${NPA_SRC_S3_URI:-}" ]; then',
            '    aws s3 sync --only-show-errors "$NPA_SRC_S3_URI" /tmp/npa-src',
            "    python3 -m pip install -q -e /tmp/npa-src",
            "  elif [ -d /opt/nebius-physical-ai/npa ]; then",
            "    python3 -m pip install -q -e /opt/nebius-physical-ai/npa",
            "  fi",
            "fi",
        ]
    body.append("command -v python3 > /tmp/npa-python")
    return "\n".join(body) + "\n"


def render_task(
    step: PlanStep, s: RenderSettings, task_name: str | None = None
) -> tuple[dict[str, Any], str | None]:
    """One SkyPilot task document for ``step`` and the image it runs in.

    ``task_name`` replaces ``step.task_name`` when the caller must keep names
    unique within one pipeline (states repeated by sequence loops).
    """
    name = task_name or step.task_name
    profile = step.resources_profile
    image = images.resolve_image(step.tool_ref, profile.get("image"), s.selection)
    if _truthy(s.config.get("require_baked_npa")) and not (
        image and images.is_immutable_qualified(image)
    ):
        raise RenderError(
            f"planned step '{step.state}' requires a registry-qualified immutable image "
            "because config.require_baked_npa is enabled",
            remedy="pin every image as registry/repo@sha256:<64 hex> (config or --image-override), "
            "or run preflight-images to resolve digests",
        )
    if image is None and not s.src_s3_uri:
        raise RenderError(
            f"planned step '{step.state}' has no workbench image and NPA_SRC_S3_URI is unset",
            remedy="export NPA_SRC_S3_URI=s3://… (npa workbench workflow stage-src prints it), "
            "or give the step an image",
        )
    if _truthy(s.config.get("source_overlay")) and not s.src_s3_uri:
        # Without a URI the setup script would skip the overlay and silently run the
        # image's own code (runtime-reference.md §6: overlay steps need staged source).
        raise RenderError(
            f"planned step '{step.state}' overlays NPA source (config.source_overlay) "
            "but NPA_SRC_S3_URI is unset",
            remedy="let submit stage the checkout (drop --no-stage-src), or export "
            "NPA_SRC_S3_URI=s3://… (npa workbench workflow stage-src prints it)",
        )
    raw_k8s = profile.get("kubernetes")
    k8s_block: dict[str, Any] = raw_k8s if isinstance(raw_k8s, dict) else {}
    pod_config: dict[str, Any] = copy.deepcopy(k8s_block.get("pod_config") or {})
    k8s = str(profile.get("cloud", "")).lower() == "kubernetes"
    if image and _runs_as_root(pod_config) and _is_first_party(image, s.selection.registry):
        raise RenderError(
            f"planned step '{step.state}' sets runAsUser: 0 on first-party image {image}",
            remedy="remove runAsUser: 0 from the profile's pod_config; workbench images run as their own user",
        )
    resources = _resources(step, profile, image, s, pod_config)
    secrets = {name: f"<{name}>" for name in (*secret_names_for_image(image), *s.secret_env)}
    _add_pull_secret(pod_config, image)
    # Key order as dsl.md §6.1 lists it: name, resources, envs, run, num_nodes, config, setup, secrets.
    doc: dict[str, Any] = {
        "name": name,
        "resources": resources,
        "envs": _envs(step, name, image, s, pod_config, k8s),
        "run": _run_script(step),
    }
    num_nodes = profile.get("num_nodes")
    if num_nodes is not None and int(str(num_nodes)) > 1:
        doc["num_nodes"] = int(str(num_nodes))
    kube: dict[str, Any] = {}
    if pod_config:
        kube["pod_config"] = pod_config
    if k8s_block.get("provision_timeout") is not None:
        kube["provision_timeout"] = int(str(k8s_block["provision_timeout"]))
    if kube:
        doc["config"] = {"kubernetes": kube}
    doc["setup"] = _setup_script(s)
    if secrets:
        doc["secrets"] = secrets
    return doc, image
