"""Which pod identities the in-cluster pull probe must prove (kubernetes.md §9.1); pure.

A step runs its image as a pod whose identity SkyPilot 0.12 builds from
three ``pod_config`` layers merged into its pod template (skypilot-0.12.md
§9.3): the isolated config's global ``kubernetes.pod_config``, then
``kubernetes.context_configs.<ctx>.pod_config``, then the task's
``config.kubernetes.pod_config`` (``render.tasks.task_pod_config``). A probe
path is what decides whether that pod can pull: the namespace, the effective
ServiceAccount, the effective pull-secret list and the placement. Steps that
share all of them share one probe; any difference is probed separately.

- **Where a step runs** (``authority``, cli.md §1.3): ``cloud: kubernetes``
  (or ``k8s``) is Kubernetes; any other ``cloud`` is a VM and needs no pod
  probe; a profile without ``cloud`` follows the exact ``--infra`` (``k8s/…``
  is Kubernetes, anything else a VM) and without one is ``UNKNOWN``: never
  guessed.
- **Namespace:** the context's, else ``default`` (the caller reads it).
- **ServiceAccount:** the context's ``remote_identity`` with the global and
  context ``serviceAccountName`` applied (``skypilot.verify``, passed in as
  ``base_account``), then the task layer's on top (skypilot-0.12.md §9.2).
- **Pull secrets:** SkyPilot's overlay rule, never a union: the first layer
  that declares ``imagePullSecrets`` may list any number; after that every
  later layer must list exactly one entry, which replaces ``base[0]`` (the
  rest of the base stays); zero or several entries over a base, or one over
  an empty base, fail in SkyPilot and are refused here (``RenderError``).
- **Placement:** ``nodeSelector``, ``affinity``, ``tolerations``,
  ``runtimeClassName``, ``priorityClassName``, ``nodeName`` and the pod
  labels (scheduling labels such as ``kueue.x-k8s.io/queue-name``), copied as
  merged. A GPU step adds SkyPilot's ``nodeAffinity <key> In [<raw values>]``
  term first (its template's, so the layers' terms are appended after it, as
  SkyPilot's list merge does), with the key SkyPilot reads on the cluster and
  the label values it matches (skypilot-0.12.md §9.4: equal to the raw or
  canonical name, case-insensitively, or a ``-``-delimited prefix of it; a
  name that only the RTX PRO alias group matches is first remapped as
  ``submit`` would, ``gpus.resolve``). Decision: the probe requests no GPU,
  so it cannot get the ``nvidia.com/gpu`` toleration a GPU request receives;
  it carries ``{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}``
  itself, the one NoSchedule taint an eligible GPU node may have (§8.2).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from npa_infra.errors import RenderError
from npa_infra.gpus import resolve
from npa_infra.gpus.catalog import GpuCatalog

__all__ = [
    "GPU_TOLERATION",
    "PLACEMENT_FIELDS",
    "Authority",
    "PathProblem",
    "Placement",
    "ProbePath",
    "authority",
    "effective_pod_config",
    "gpu_affinity",
    "merge_pod_config",
    "probe_path",
]

_KUBERNETES = frozenset({"kubernetes", "k8s"})
PLACEMENT_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
    "priorityClassName",
    "nodeName",
)
GPU_TOLERATION: Mapping[str, str] = {
    "key": "nvidia.com/gpu",
    "operator": "Exists",
    "effect": "NoSchedule",
}
_NAME_KEYED = frozenset({"containers", "initContainers", "env", "volumes", "volumeMounts"})
_PULL = "imagePullSecrets"


class Authority(StrEnum):
    """Where a step's pod runs (cli.md §1.3: never guessed)."""

    KUBERNETES = "kubernetes"
    VM = "vm"
    UNKNOWN = "unknown"


def authority(profile: Mapping[str, Any], infra: str | None) -> Authority:
    """Kubernetes, VM or unknown for a step with this resources ``profile`` under ``--infra``."""
    cloud = str(profile.get("cloud") or "").strip().lower()
    if cloud in _KUBERNETES:
        return Authority.KUBERNETES
    if cloud:
        return Authority.VM
    if infra and infra.startswith("k8s/"):
        return Authority.KUBERNETES
    return Authority.VM if infra else Authority.UNKNOWN


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the pod may land: ``fields`` is canonical JSON of the placement fields present."""

    fields: str = "{}"
    labels: tuple[tuple[str, str], ...] = ()

    def spec(self) -> dict[str, Any]:
        """The placement fields as a pod spec fragment (a fresh copy)."""
        out: dict[str, Any] = json.loads(self.fields)
        return out

    def digest(self) -> str:
        """16 hex of sha256 over the fields and labels: the placement's identity."""
        text = json.dumps([self.fields, self.labels], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ProbePath:
    """One pod identity to prove; equal paths are probed once."""

    context: str
    namespace: str
    service_account: str
    pull_secrets: tuple[str, ...]
    placement: Placement

    def key(self) -> str:
        """``context|namespace|account|secret,secret|placement digest``."""
        secrets = ",".join(self.pull_secrets)
        return "|".join(
            (self.context, self.namespace, self.service_account, secrets, self.placement.digest())
        )


@dataclass(frozen=True, slots=True)
class PathProblem:
    """Why a step's pod identity cannot be rebuilt (the row stays unproven)."""

    state: str
    reason: str


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _merge_named(base: list[Any], override: list[Any], key: str) -> None:
    for entry in override:
        if not isinstance(entry, dict):
            base.append(copy.deepcopy(entry))
            continue
        name = entry.get("name")
        if name is None and key == "containers" and base and isinstance(base[0], dict):
            merge_pod_config(base[0], entry)  # an unnamed container patches containers[0]
            continue
        match = next(
            (b for b in base if isinstance(b, dict) and name is not None and b.get("name") == name),
            None,
        )
        if match is None:
            base.append(copy.deepcopy(entry))
        else:
            merge_pod_config(match, entry)


def _merge_pull_secrets(base: list[Any], override: list[Any], layer: str) -> None:
    # skypilot-0.12.md §9.3: over an existing list, exactly one entry, replacing base[0].
    if len(override) != 1:
        raise RenderError(
            f"the {layer} pod_config lists {len(override)} imagePullSecrets over an earlier "
            "layer's list; SkyPilot 0.12 accepts exactly one there (it replaces the first)",
            remedy="give that layer exactly one imagePullSecrets entry, or declare the whole "
            "list in the first layer that sets it",
        )
    if not base:
        raise RenderError(
            f"the {layer} pod_config overrides an empty imagePullSecrets list; SkyPilot 0.12 "
            "cannot merge into an empty list",
            remedy="declare the Secret in the earlier layer, or drop its empty list",
        )
    first = base[0] if isinstance(base[0], dict) else {}
    base[0] = {**first, **copy.deepcopy(override[0])}


def merge_pod_config(
    base: dict[str, Any], override: Mapping[str, Any], *, layer: str = "task"
) -> dict[str, Any]:
    """Merge ``override`` into ``base`` in place as SkyPilot 0.12 does; returns ``base``.

    Raises:
        RenderError: an ``imagePullSecrets`` overlay SkyPilot would reject.
    """
    for key, value in override.items():
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            merge_pod_config(current, value, layer=layer)
        elif isinstance(value, list) and isinstance(current, list):
            if key == _PULL:
                _merge_pull_secrets(current, value, layer)
            elif key in _NAME_KEYED:
                _merge_named(current, value, key)
            else:
                current.extend(copy.deepcopy(value))
        else:
            base[key] = copy.deepcopy(value)
    return base


def _layers(sky_config: Mapping[str, Any], context: str) -> list[tuple[str, Mapping[str, Any]]]:
    kube = sky_config.get("kubernetes")
    kube = kube if isinstance(kube, Mapping) else {}
    contexts = kube.get("context_configs")
    entry = contexts.get(context) if isinstance(contexts, Mapping) else None
    entry = entry if isinstance(entry, Mapping) else {}
    found = []
    for name, layer in (("global", kube), (f"context {context}", entry)):
        pod = layer.get("pod_config")
        if isinstance(pod, Mapping):
            found.append((name, pod))
    return found


def effective_pod_config(
    sky_config: Mapping[str, Any],
    context: str,
    task: Mapping[str, Any],
    *,
    template: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``template`` ← global ← context ← task, with SkyPilot's merge rules.

    Raises:
        RenderError: an ``imagePullSecrets`` overlay SkyPilot would reject.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(template or {}))
    for layer, pod in [*_layers(sky_config, context), ("task", task)]:
        merge_pod_config(merged, pod, layer=layer)
    return merged


def _matches(name: str, candidate: str) -> bool:
    wanted, text = name.casefold(), candidate.casefold()
    return bool(wanted) and (text == wanted or text.startswith(wanted + "-"))


def gpu_affinity(request: str, catalog: GpuCatalog) -> tuple[str, tuple[str, ...]] | None:
    """SkyPilot's GPU node-affinity term for ``NAME[:N]``: (label key, raw values), or None.

    None when the cluster advertises no GPU label or nothing matches.
    """
    key = catalog.label_key
    if key is None:
        return None
    name = request.strip().rpartition(":")[0] if ":" in request else request.strip()
    values = [
        a.label_value
        for a in catalog.accelerators
        if _matches(name, a.label_value) or _matches(name, a.name)
    ]
    if not values:
        resolved = resolve.resolve_accelerator(request, catalog)
        if resolved.verdict.ok and resolved.accelerator:
            values = [a.label_value for a in catalog.accelerators if a.name == resolved.accelerator]
    return (key, tuple(dict.fromkeys(values))) if values else None


def _gpu_template(key: str, values: Sequence[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
    return {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            },
            "tolerations": [dict(GPU_TOLERATION)],
        }
    }


def _accelerator(profile: Mapping[str, Any], override: str) -> str | None:
    request = resolve.accelerator_request(profile)
    if request is None or not override:
        return request
    if ":" in override:
        return override
    count = request.rsplit(":", 1)[1] if ":" in request else "1"
    return f"{override}:{count}"


def _pull_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    refs = spec.get(_PULL)
    if not isinstance(refs, list):
        return ()
    return tuple(str(r["name"]) for r in refs if isinstance(r, Mapping) and r.get("name"))


def probe_path(
    state: str,
    profile: Mapping[str, Any],
    task_pod_config: Mapping[str, Any],
    *,
    context: str,
    namespace: str,
    sky_config: Mapping[str, Any],
    base_account: str,
    catalog: GpuCatalog | None = None,
    gpu_override: str = "",
) -> ProbePath | PathProblem:
    """The probe path of one Kubernetes step, or why it cannot be rebuilt.

    ``catalog`` is the context's GPU catalog, needed only for GPU steps.

    Raises:
        RenderError: an ``imagePullSecrets`` overlay SkyPilot would reject.
    """
    template: dict[str, Any] = {}
    request = _accelerator(profile, gpu_override)
    if request is not None:
        if catalog is None:
            return PathProblem(state, f"the GPU catalog of context {context!r} was not read")
        term = gpu_affinity(request, catalog)
        if term is None:
            offered = ", ".join(catalog.names) or "none"
            return PathProblem(
                state,
                f"no GPU node of context {context!r} matches {request} (advertised: {offered}), "
                "so the job's GPU placement cannot be rebuilt",
            )
        template = _gpu_template(*term)
    merged = effective_pod_config(sky_config, context, task_pod_config, template=template)
    spec = merged.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    task_spec = task_pod_config.get("spec")
    task_account = task_spec.get("serviceAccountName") if isinstance(task_spec, Mapping) else None
    account = task_account if isinstance(task_account, str) and task_account else base_account
    fields = {k: spec[k] for k in PLACEMENT_FIELDS if spec.get(k) not in (None, "", [], {})}
    metadata = merged.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    pairs = tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items()))
    return ProbePath(
        context=context,
        namespace=namespace,
        service_account=account,
        pull_secrets=_pull_names(spec),
        placement=Placement(_canonical(fields), pairs),
    )
