"""Why a PENDING or STARTING managed job has not started: one reason code per job.

Purely computational (style.md rule 2): the callers read the job's pods
(``KubeApi.job_pods``), the NotReady nodes and optionally the GPU catalog, and
pass them in; ``diagnose`` never does I/O and never raises. It implements the
classification of kubernetes.md §6.3, which runtime-reference.md §4 names as
npa-infra's: it keeps the reference's codes and adds ``IMAGE_NEVER_PULL``,
``CONFIG_REFERENCE_MISSING``, ``POD_CONFIG_INVALID``, ``GPU_SHAPE_IMPOSSIBLE``
and ``PREEMPTED``, each with the class that drives the supervisor's action.

Evidence per pod (kubernetes.md §6.2, runtime-reference.md §4): pods in phase
``Running`` or ``Succeeded`` are skipped; the blocker is the first waiting
reason of ``containers[]``, then ``initContainers[]`` (``ContainerCreating`` and
``PodInitializing``, the normal states while pulling and while init containers
run, are ignored), else a ``PodScheduled`` condition that is not ``True``;
then ``DisruptionTarget`` conditions and the pod's Warning events.

Verdict across pods: the table's rows are tried in order and the first row
that any pod matches wins; among pods matching that row, the first pod in
``(namespace, name)`` order. With no blocker anywhere, a NotReady node gives
``NODE_NOT_READY`` (row 9), else ``PENDING_UNKNOWN``; with no pod at all the
verdict is the diagnostic failure ``KUBERNETES_PODS_NOT_FOUND``.

A pull refused for good (kubernetes.md §6.3 rows 1-3: ``401``, ``403``,
``unauthorized``, ``forbidden``, ``denied``, ``authentication required``, ``not
found``, ``manifest unknown``, ``404``, ``invalid reference``, in any case and
position; ``PERMANENT_PULL_TEXT``) is permanent and stops the job at once; any
other pull failure (timeouts, 429 ``toomanyrequests``, 5xx, refused
connections) is ``IMAGE_PULL_FAILED``, transient.

Where the two documents differ, kubernetes.md §6.3 rules: its row order (image
and configuration rows before scheduling rows), its class per code, and
``GPU_SHAPE_IMPOSSIBLE`` only from the GPU catalog (runtime-reference.md §4
"npa-infra must"). Without a catalog an Unschedulable message about GPUs keeps
the reference's ``ACCELERATOR_MISMATCH``, classed ``unknown``: scheduler text
alone never proves a shape impossible, so it never stops or relaunches a job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from npa_infra.gpus import labels
from npa_infra.gpus.catalog import GpuCatalog
from npa_infra.kube.models import (
    ContainerTerminated,
    ContainerWaiting,
    KubeErrorKind,
    NodeInfo,
    PodCondition,
    PodEvent,
    PodObservation,
)

__all__ = [
    "CLASS_OF",
    "CLUSTER_LABEL",
    "MESSAGE_CAP",
    "PERMANENT_PULL_TEXT",
    "ROWS",
    "BlockerClass",
    "PendingCode",
    "PendingDiagnosis",
    "diagnose",
    "diagnostic_failure",
    "is_controller_pod",
    "job_label_matches",
    "not_ready_nodes",
    "pod_of_job",
]

CLUSTER_LABEL = "skypilot-cluster-name"  # kubernetes.md §6.1
MESSAGE_CAP = 500
EVIDENCE_CAP = 40

JsonField = str | int | list[str] | None


class PendingCode(StrEnum):
    """kubernetes.md §6.3 codes, and the diagnostic failures that carry no class."""

    IMAGE_PULL_AUTH = "IMAGE_PULL_AUTH"
    IMAGE_NOT_FOUND = "IMAGE_NOT_FOUND"
    IMAGE_REFERENCE_INVALID = "IMAGE_REFERENCE_INVALID"
    IMAGE_NEVER_PULL = "IMAGE_NEVER_PULL"
    CONFIG_REFERENCE_MISSING = "CONFIG_REFERENCE_MISSING"
    POD_CONFIG_INVALID = "POD_CONFIG_INVALID"
    GPU_SHAPE_IMPOSSIBLE = "GPU_SHAPE_IMPOSSIBLE"
    ACCELERATOR_MISMATCH = "ACCELERATOR_MISMATCH"  # the reference's row-7 code, no catalog
    CAPACITY_OR_QUOTA = "CAPACITY_OR_QUOTA"
    NODE_NOT_READY = "NODE_NOT_READY"
    PREEMPTED = "PREEMPTED"
    STORAGE_PENDING = "STORAGE_PENDING"
    IMAGE_PULL_FAILED = "IMAGE_PULL_FAILED"
    INIT_CONTAINER_FAILED = "INIT_CONTAINER_FAILED"
    CONTAINER_CRASH = "CONTAINER_CRASH"
    CONTROLLER_BACKOFF = "CONTROLLER_BACKOFF"
    UNSCHEDULABLE = "UNSCHEDULABLE"
    PENDING_UNKNOWN = "PENDING_UNKNOWN"
    # Diagnostic failures (kubernetes.md §6.3): no class; never acted on.
    KUBERNETES_DNS = "KUBERNETES_DNS"
    KUBERNETES_RBAC = "KUBERNETES_RBAC"
    KUBERNETES_AUTHENTICATION = "KUBERNETES_AUTHENTICATION"
    KUBERNETES_TIMEOUT = "KUBERNETES_TIMEOUT"
    KUBERNETES_PODS_NOT_FOUND = "KUBERNETES_PODS_NOT_FOUND"
    KUBERNETES_RESPONSE_UNPARSEABLE = "KUBERNETES_RESPONSE_UNPARSEABLE"
    KUBERNETES_DIAGNOSTICS_UNAVAILABLE = "KUBERNETES_DIAGNOSTICS_UNAVAILABLE"


class BlockerClass(StrEnum):
    """What the supervisor does about a code (kubernetes.md §6.3 "Actions")."""

    PERMANENT = "permanent"  # stop, cancel that exact id, spend no budget
    TRANSIENT = "transient"  # tolerate for the grace period, then recover
    PAYLOAD = "payload"  # counts against --retries
    UNKNOWN = "unknown"  # keep observing, never relaunch


_P, _T, _L, _U = (
    BlockerClass.PERMANENT,
    BlockerClass.TRANSIENT,
    BlockerClass.PAYLOAD,
    BlockerClass.UNKNOWN,
)
# kubernetes.md §6.3, in row order: the first row any pod matches wins.
ROWS: tuple[tuple[PendingCode, BlockerClass], ...] = (
    (PendingCode.IMAGE_PULL_AUTH, _P),
    (PendingCode.IMAGE_NOT_FOUND, _P),
    (PendingCode.IMAGE_REFERENCE_INVALID, _P),
    (PendingCode.IMAGE_NEVER_PULL, _P),
    (PendingCode.CONFIG_REFERENCE_MISSING, _P),
    (PendingCode.POD_CONFIG_INVALID, _P),
    (PendingCode.GPU_SHAPE_IMPOSSIBLE, _P),
    (PendingCode.ACCELERATOR_MISMATCH, _U),
    (PendingCode.CAPACITY_OR_QUOTA, _T),
    (PendingCode.NODE_NOT_READY, _T),
    (PendingCode.PREEMPTED, _T),
    (PendingCode.STORAGE_PENDING, _T),
    (PendingCode.IMAGE_PULL_FAILED, _T),
    (PendingCode.INIT_CONTAINER_FAILED, _L),
    (PendingCode.CONTAINER_CRASH, _L),
    (PendingCode.CONTROLLER_BACKOFF, _T),
    (PendingCode.UNSCHEDULABLE, _U),
    (PendingCode.PENDING_UNKNOWN, _U),
)
_RANK = {code: index for index, (code, _) in enumerate(ROWS)}
CLASS_OF: dict[PendingCode, BlockerClass] = dict(ROWS)

_SKIPPED_PHASES = frozenset({"Running", "Succeeded"})  # kubernetes.md §6.1: not blockers
_NORMAL_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
_PULL = frozenset({"ErrImagePull", "ImagePullBackOff"})
_CRASH = frozenset({"CrashLoopBackOff", "ContainerCannotRun"})
# kubernetes.md §6.3 rows 1-3 (and issue 15): the registry's permanent answers to a pull
_AUTH_TEXT = ("401", "403", "unauthorized", "forbidden", "denied", "authentication required")
_NOT_FOUND_TEXT = ("not found", "manifest unknown", "404")
_INVALID_REFERENCE_TEXT = ("invalid reference",)
PERMANENT_PULL_TEXT = (*_AUTH_TEXT, *_NOT_FOUND_TEXT, *_INVALID_REFERENCE_TEXT)
_CONFIG_MISSING = re.compile(r'\b(?:secret|configmap) "[^"]*" not found', re.IGNORECASE)
_STORAGE_EVENTS = frozenset({"FailedMount", "FailedAttachVolume"})
_NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_AFFINITY = "didn't match pod's node affinity/selector"
# kubernetes.md §4.2: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: …".
# The list ends at the first ". " (a bare "." would cut "nvidia.com/gpu").
_AVAILABLE = re.compile(r"nodes are available:\s*(.*?)(?:\.\s|\.$|$)", re.IGNORECASE | re.DOTALL)
_COUNT = re.compile(r"^\d+\s+")
_DIGEST = re.compile(r"sha256:[0-9a-f]+", re.IGNORECASE)
_DNS_TEXT = (
    "name resolution",
    "name or service not known",
    "nodename nor servname",
    "getaddrinfo",
    "no such host",
)
_TIMEOUT_TEXT = ("timed out", "timeout")


@dataclass(frozen=True, slots=True)
class PendingDiagnosis:
    """The one verdict for a job: a code, its class, and the pod and text behind it."""

    job_id: int
    code: PendingCode
    blocker_class: BlockerClass | None  # None for the diagnostic failures
    pod: str | None  # namespace/name of the blocking pod
    reason: str  # the upstream reason (waiting reason, condition reason, event reason)
    message: str  # at most MESSAGE_CAP characters
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, JsonField]:
        """``blockers[]`` entry of cli.md §1.4/§1.5: ``code``, ``class``, ``evidence``, and more."""
        return {
            "job_id": self.job_id,
            "code": self.code.value,
            "class": self.blocker_class.value if self.blocker_class is not None else None,
            "pod": self.pod,
            "reason": self.reason,
            "message": self.message,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What kubernetes.md §6.2 collects for one pod."""

    pod: PodObservation
    waiting: ContainerWaiting | None
    waiting_init: bool  # the waiting reason came from an init container
    scheduled: PodCondition | None  # PodScheduled, when not True
    disruptions: tuple[PodCondition, ...]
    events: tuple[PodEvent, ...]
    init_failed: ContainerTerminated | None

    @property
    def scheduling_parts(self) -> tuple[str, ...]:
        """The scheduler's verdicts: an Unschedulable condition, then FailedScheduling events."""
        parts: list[str] = []
        if self.scheduled is not None and self.scheduled.reason == "Unschedulable":
            parts.append(self.scheduled.message or self.scheduled.reason)
        parts += [e.message for e in self.events if e.reason == "FailedScheduling"]
        return tuple(p for p in parts if p)

    @property
    def scheduling_text(self) -> str:
        return "\n".join(self.scheduling_parts)

    @property
    def unschedulable(self) -> bool:
        return (self.scheduled is not None and self.scheduled.reason == "Unschedulable") or any(
            e.reason == "FailedScheduling" for e in self.events
        )


class _Match(NamedTuple):
    """One row's result for one pod: the code, and the reason and message behind it."""

    code: PendingCode
    reason: str
    message: str


def job_label_matches(value: str, job_id: int) -> bool:
    """Whether a ``skypilot-cluster-name`` value names managed job ``job_id``.

    kubernetes.md §6.1: the value split on ``-`` contains the id as a whole
    component (``t-1-ab`` is job 1, never job 12); a substring is never enough.
    """
    return str(job_id) in value.split("-")


def pod_of_job(value: str, job_id: int, cluster_name: str | None) -> bool:
    """Whether a pod whose ``skypilot-cluster-name`` is ``value`` belongs to job ``job_id``:
    the queue's ``cluster_name_on_cloud`` when it gives one, else a whole ``-``
    component (kubernetes.md §6.1)."""
    if cluster_name:
        return value == cluster_name
    return job_label_matches(value, job_id)


def is_controller_pod(name: str, pod_labels: Iterable[tuple[str, str]] = ()) -> bool:
    """A jobs-controller pod (kubernetes.md §6.1), never a job's pod."""
    base = name.removesuffix("-ray-head")
    values = [value for key, value in pod_labels if key == CLUSTER_LABEL]
    return base.startswith("sky-jobs-controller-") or any(
        v.startswith("sky-jobs-controller-") for v in values
    )


def not_ready_nodes(nodes: Iterable[NodeInfo]) -> tuple[str, ...]:
    """Names of the nodes whose ``Ready`` condition is not ``True`` (kubernetes.md §6.2)."""
    return tuple(n.name for n in nodes if not n.ready)


def _cap(text: str) -> str:
    return text if len(text) <= MESSAGE_CAP else text[: MESSAGE_CAP - 1] + "…"


def _collect(pod: PodObservation) -> _Evidence:
    """kubernetes.md §4.1, §6.2: containers first, then init containers; the rest in order."""
    waiting, init = None, False
    for candidates, is_init in ((pod.container_waiting, False), (pod.init_container_waiting, True)):
        found = next((w for w in candidates if w.reason not in _NORMAL_WAITING and w.reason), None)
        if found is not None:
            waiting, init = found, is_init
            break
    scheduled = pod.condition("PodScheduled")
    disruptions = tuple(
        c for c in pod.conditions if c.type == "DisruptionTarget" and c.status == "True"
    )
    failed_init = next(
        (t for t in pod.init_container_terminated if t.exit_code != 0),
        None,
    )
    return _Evidence(
        pod=pod,
        waiting=waiting,
        waiting_init=init,
        scheduled=scheduled if scheduled is not None and scheduled.status != "True" else None,
        disruptions=disruptions,
        events=tuple(e for e in pod.events if e.type == "Warning"),
        init_failed=failed_init,
    )


def _fragments(parts: Iterable[str]) -> list[str]:
    """The ``N <reason>`` fragments of each FitError message, counts stripped, lowercased.

    kubernetes.md §4.2: only the first list of each message; the ``preemption:``
    list that follows it is about victims, not about the nodes.
    """
    out: list[str] = []
    for text in parts:
        match = _AVAILABLE.search(text)
        for part in match.group(1).split(", ") if match else ():
            fragment = _COUNT.sub("", part.strip()).strip().lower()
            if fragment:
                out.append(fragment)
    return out


def _registry_text(text: str) -> str:
    """Lowercased, with digests removed: hex such as ``…401…`` must not read as a status."""
    return _DIGEST.sub("", text).lower()


def _says(text: str, tokens: Iterable[str]) -> bool:
    """Whether ``text`` holds a token; a numeric token only as a whole word (``401``, not ``a401f``)."""
    return any(
        re.search(rf"(?<![0-9a-z]){token}(?![0-9a-z])", text) if token.isdigit() else token in text
        for token in tokens
    )


def _gpu_shape_impossible(pod: PodObservation, catalog: GpuCatalog) -> bool:
    """kubernetes.md §6.3 row 7: *provably* no eligible node carries the product with >= N.

    Permanent only on proof: while GPU nodes await labelling (§8.1), or when the
    pod selects its product by a key the catalog does not read, it is not proven.
    """
    if catalog.not_yet_labelled:
        return False
    if any(key != catalog.label_key for key, _ in pod.gpu_selector):
        return False
    wanted = {labels.normalise(value) for _, value in pod.gpu_selector}
    for accelerator in catalog.accelerators:
        names = {labels.normalise(accelerator.name), labels.normalise(accelerator.label_value)}
        if wanted and not wanted & names:
            continue
        if accelerator.requestable_qty_per_node >= pod.gpu_request:
            return False
    return True


def _image_rows(ev: _Evidence) -> _Match | None:
    """kubernetes.md §6.3 rows 1-6: image, configuration and pod-spec blockers (permanent)."""
    w = ev.waiting
    events = " ".join(e.message for e in ev.events)
    if w is not None and w.reason in _PULL:
        text = _registry_text(f"{w.message} {events}")
        # row 1: the registry refused our credentials
        if _says(text, _AUTH_TEXT):
            return _Match(PendingCode.IMAGE_PULL_AUTH, w.reason, w.message)
        # row 2: the reference does not exist
        if _says(text, _NOT_FOUND_TEXT):
            return _Match(PendingCode.IMAGE_NOT_FOUND, w.reason, w.message)
        # row 3: the runtime could not parse the reference (``invalid reference format``)
        if _says(text, _INVALID_REFERENCE_TEXT):
            return _Match(PendingCode.IMAGE_REFERENCE_INVALID, w.reason, w.message)
    if w is not None and w.reason == "InvalidImageName":  # row 3
        return _Match(PendingCode.IMAGE_REFERENCE_INVALID, w.reason, w.message)
    if w is not None and w.reason == "ErrImageNeverPull":  # row 4
        return _Match(PendingCode.IMAGE_NEVER_PULL, w.reason, w.message)
    if w is not None and w.reason == "CreateContainerConfigError":  # row 5
        return _Match(PendingCode.CONFIG_REFERENCE_MISSING, w.reason, w.message)
    config_event = next((e for e in ev.events if _CONFIG_MISSING.search(e.message)), None)
    if config_event is not None:  # row 5: the kubelet's `Error: secret "x" not found`
        return _Match(
            PendingCode.CONFIG_REFERENCE_MISSING, config_event.reason, config_event.message
        )
    if w is not None and w.reason == "CreateContainerError":  # row 6
        return _Match(PendingCode.POD_CONFIG_INVALID, w.reason, w.message)
    for event in ev.events:  # row 6: rejected at create (not by quota), or SkyPilot's pod_config
        rejected = event.reason == "FailedCreate" and "exceeded quota" not in event.message
        if rejected or "invalid pod_config" in event.message.lower():
            return _Match(PendingCode.POD_CONFIG_INVALID, event.reason, event.message)
    return None


def _scheduling_rows(ev: _Evidence, catalog: GpuCatalog | None) -> _Match | None:
    """kubernetes.md §6.3 rows 7-9 on an Unschedulable pod (§4.2 fragments)."""
    if not ev.unschedulable:
        return None
    text = ev.scheduling_text
    lowered = text.lower()
    fragments = _fragments(ev.scheduling_parts)
    reason = ev.scheduled.reason if ev.scheduled is not None else "FailedScheduling"
    pod = ev.pod
    about_gpu = "gpu" in lowered or "accelerator" in lowered
    gpu_affinity = pod.gpu_request > 0 and any(_AFFINITY in f for f in fragments)
    if about_gpu or gpu_affinity:
        if catalog is None:
            # runtime-reference.md §4: never GPU_SHAPE_IMPOSSIBLE from scheduler text alone.
            return _Match(PendingCode.ACCELERATOR_MISMATCH, reason, text)
        if pod.gpu_request > 0 and _gpu_shape_impossible(pod, catalog):  # row 7
            return _Match(PendingCode.GPU_SHAPE_IMPOSSIBLE, reason, text)
    capacity = any(f.startswith("insufficient ") or f == "too many pods" for f in fragments)
    # row 8; the reference's words too: quota (``exceeded quota``), capacity, no nodes.
    if capacity or any(word in lowered for word in ("quota", "capacity", "no nodes")):
        return _Match(PendingCode.CAPACITY_OR_QUOTA, reason, text)
    if any("untolerated taint" in f and any(k in f for k in _NOT_READY_TAINTS) for f in fragments):
        return _Match(PendingCode.NODE_NOT_READY, reason, text)  # row 9
    return None


def _runtime_rows(ev: _Evidence) -> _Match | None:
    """kubernetes.md §6.3 rows 10-16, after the scheduling rows."""
    w = ev.waiting
    if ev.disruptions:  # row 10: preemption, taint eviction, node shutdown
        first = ev.disruptions[0]
        return _Match(PendingCode.PREEMPTED, first.reason, first.message)
    text = ev.scheduling_text.lower()
    if ev.unschedulable and ("persistentvolumeclaim" in text or "pvc" in text or "volume" in text):
        return _Match(PendingCode.STORAGE_PENDING, "Unschedulable", ev.scheduling_text)  # row 11
    storage = next((e for e in ev.events if e.reason in _STORAGE_EVENTS), None)
    if storage is not None:  # row 11: FailedMount, FailedAttachVolume
        return _Match(PendingCode.STORAGE_PENDING, storage.reason, storage.message)
    if w is not None and (w.reason in _PULL or w.reason == "RegistryUnavailable"):  # row 12
        return _Match(PendingCode.IMAGE_PULL_FAILED, w.reason, w.message)
    if w is not None and ev.waiting_init:  # row 13: an init container is failing
        return _Match(PendingCode.INIT_CONTAINER_FAILED, w.reason, w.message)
    if ev.init_failed is not None:  # row 13: it exited non-zero
        t = ev.init_failed
        message = t.message or f"init container {t.container} exited with {t.exit_code}"
        return _Match(PendingCode.INIT_CONTAINER_FAILED, t.reason, message)
    if w is not None and w.reason in _CRASH:  # row 14
        return _Match(PendingCode.CONTAINER_CRASH, w.reason, w.message)
    if w is not None and "backoff" in w.reason.lower():  # row 15
        return _Match(PendingCode.CONTROLLER_BACKOFF, w.reason, w.message)
    backoff = next((e for e in ev.events if e.reason == "BackOff"), None)
    if backoff is not None:  # row 15: a generic BackOff event
        return _Match(PendingCode.CONTROLLER_BACKOFF, backoff.reason, backoff.message)
    if ev.unschedulable:  # row 16: other fragments (non-GPU affinity, custom taints)
        reason = ev.scheduled.reason if ev.scheduled is not None else "FailedScheduling"
        return _Match(PendingCode.UNSCHEDULABLE, reason, ev.scheduling_text)
    return None


def _classify(ev: _Evidence, catalog: GpuCatalog | None) -> _Match | None:
    """One pod's first matching row, or None when it shows no blocker."""
    found = _image_rows(ev) or _scheduling_rows(ev, catalog) or _runtime_rows(ev)
    if found is not None:
        return found
    w, scheduled = ev.waiting, ev.scheduled
    if w is not None:  # row 17: a waiting reason the table does not name
        return _Match(PendingCode.PENDING_UNKNOWN, w.reason, w.message)
    if scheduled is not None:  # row 17: e.g. PodScheduled=False SchedulingGated
        return _Match(PendingCode.PENDING_UNKNOWN, scheduled.reason, scheduled.message)
    return None


def _evidence_lines(ev: _Evidence) -> list[str]:
    ref = ev.pod.ref
    lines: list[str] = []
    if ev.waiting is not None:
        kind = "init container" if ev.waiting_init else "container"
        w = ev.waiting
        lines.append(f"{ref}: {kind} {w.container} waiting {w.reason}: {w.message}".rstrip(": "))
    if ev.init_failed is not None:
        t = ev.init_failed
        lines.append(f"{ref}: init container {t.container} terminated {t.reason} ({t.exit_code})")
    if ev.scheduled is not None:
        s = ev.scheduled
        lines.append(f"{ref}: PodScheduled={s.status} {s.reason}: {s.message}".rstrip(": "))
    lines += [f"{ref}: DisruptionTarget=True {c.reason}: {c.message}" for c in ev.disruptions]
    lines += [f"{ref}: event {e.reason}: {e.message}" for e in ev.events]
    return [_cap(line) for line in lines]


def diagnose(
    pods: Sequence[PodObservation],
    *,
    job_id: int,
    nodes_not_ready: Sequence[str] = (),
    catalog: GpuCatalog | None = None,
) -> PendingDiagnosis:
    """The one reason code for managed job ``job_id`` from its pods; total, never raises.

    ``nodes_not_ready``: the cluster's NotReady nodes (``not_ready_nodes``).
    ``catalog``: the context's GPU catalog; without it GPU shapes are never
    judged impossible (``ACCELERATOR_MISMATCH``, class unknown).
    """
    ordered = sorted(pods, key=lambda p: (p.namespace, p.name))
    if not ordered:  # kubernetes.md §6.3: a diagnostic failure, no class
        return PendingDiagnosis(
            job_id,
            PendingCode.KUBERNETES_PODS_NOT_FOUND,
            None,
            None,
            "",
            f"no pod is labelled {CLUSTER_LABEL} for managed job {job_id}",
        )
    active = [_collect(p) for p in ordered if p.phase not in _SKIPPED_PHASES]
    evidence = [f"{p.ref}: {p.phase}, skipped" for p in ordered if p.phase in _SKIPPED_PHASES]
    best: tuple[int, _Evidence, _Match] | None = None
    for ev in active:
        evidence += _evidence_lines(ev)
        found = _classify(ev, catalog)
        if found is not None and (best is None or _RANK[found.code] < best[0]):
            best = (_RANK[found.code], ev, found)
    evidence += [f"node {name}: Ready is not True" for name in nodes_not_ready]
    kept = tuple(evidence[:EVIDENCE_CAP])
    if best is not None:
        _, ev, match = best
        code = match.code
        return PendingDiagnosis(
            job_id, code, CLASS_OF[code], ev.pod.ref, match.reason, _cap(match.message), kept
        )
    if nodes_not_ready:  # row 9: no blocker while a node is NotReady
        names = ", ".join(nodes_not_ready)
        message = _cap(f"no pod shows a blocker; NotReady node(s): {names}")
        return PendingDiagnosis(
            job_id,
            PendingCode.NODE_NOT_READY,
            CLASS_OF[PendingCode.NODE_NOT_READY],
            None,
            "NodeNotReady",
            message,
            kept,
        )
    return PendingDiagnosis(  # row 17
        job_id,
        PendingCode.PENDING_UNKNOWN,
        CLASS_OF[PendingCode.PENDING_UNKNOWN],
        None,
        "",
        f"no pod of managed job {job_id} shows a blocker",
        kept,
    )


def diagnostic_failure(kind: KubeErrorKind, detail: str, *, job_id: int) -> PendingDiagnosis:
    """The diagnostic code for a failed pod read (kubernetes.md §6.3); never acted on."""
    text = detail.lower()
    if kind in (KubeErrorKind.AUTH, KubeErrorKind.CERTIFICATE, KubeErrorKind.EXEC_PLUGIN):
        code = PendingCode.KUBERNETES_AUTHENTICATION
    elif kind is KubeErrorKind.FORBIDDEN:
        code = PendingCode.KUBERNETES_RBAC
    elif kind is KubeErrorKind.TRANSPORT and any(t in text for t in _DNS_TEXT):
        code = PendingCode.KUBERNETES_DNS
    elif kind is KubeErrorKind.TRANSPORT and any(t in text for t in _TIMEOUT_TEXT):
        code = PendingCode.KUBERNETES_TIMEOUT
    elif kind is KubeErrorKind.UNEXPECTED:
        code = PendingCode.KUBERNETES_RESPONSE_UNPARSEABLE
    else:
        code = PendingCode.KUBERNETES_DIAGNOSTICS_UNAVAILABLE
    return PendingDiagnosis(job_id, code, None, None, kind.value, _cap(detail))
