"""Run one pull-probe pod through a ``PodProber``: the effects of kubernetes.md §9.4.

1. When the path requests no pull secrets, read the ServiceAccount first and
   expect exactly its ``imagePullSecrets`` on the pod (§9.3); a missing
   account means no proof.
2. Create the pod, at most 3 times, with a new nonce on ``AlreadyExists``;
   check the create response's name, labels, UID, image and identity.
3. Watch it by ``metadata.name`` in windows of at most ``WINDOW`` seconds
   (``timeoutSeconds``) until ``probe_verdict.stop_reason`` holds or the
   deadline (``deadline_seconds``; 0 = none) passes. A transient watch failure
   is retried a few times within the deadline.
4. **Always** clean up, also after a rejected proof, an API failure or an
   interrupt (``KeyboardInterrupt`` propagates after the cleanup): DELETE with
   the server-side UID precondition, retried on a transient failure, then
   confirm the pod gone: a 404, or the name now carrying another UID; a pod
   still terminating is watched for up to ``GONE_WAIT`` seconds. Nothing is
   ever deleted by name alone.
5. When the secrets came from the ServiceAccount, read it again: a change
   means the proof may be about credentials the job will not have.

The verdict is ``probe_verdict.decide``'s; ``LivePods`` lets the caller
delete (by UID) the pods still in flight when the operator interrupts.
Nonces, the clock, sleeping and cancellation are injected (``Tools``).
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from npa_infra.errors import KubeError
from npa_infra.kube.base import PodProber
from npa_infra.kube.models import KubeErrorKind, ProbePod
from npa_infra.registry.models import ProbeCleanup, ProbeRecord
from preflight import probe_pod, probe_verdict
from preflight.probe_ledger import ProbeLedger
from preflight.probe_paths import ProbePath
from preflight.probe_verdict import Observation

__all__ = [
    "CREATE_ATTEMPTS",
    "GONE_WAIT",
    "WINDOW",
    "LivePods",
    "ProbeJob",
    "Tools",
    "cleanup",
    "run_probe",
]

WINDOW = 10  # seconds per watch request: short, so an interrupt is honoured quickly
CREATE_ATTEMPTS = 3  # kubernetes.md §9.4 step 1
DELETE_ATTEMPTS = 3
WATCH_RETRIES = 5
GONE_WAIT = 60  # seconds a terminating probe pod may take to disappear
_TRANSIENT = frozenset({KubeErrorKind.TRANSPORT, KubeErrorKind.RATE_LIMIT, KubeErrorKind.SERVER})


def _nonce() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class Tools:
    """The probe's injected effects: nonces, a monotonic clock, sleep, and cancellation."""

    nonce: Callable[[], str] = _nonce
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True, slots=True)
class ProbeJob:
    """One image (by digest) on one probe path."""

    image: str  # <registry>/<repo>@sha256:…
    digest: str
    platform_digest: str | None
    path: ProbePath
    run_id: str
    contract: str


class LivePods:
    """Pods created and not yet cleaned up, by UID: what an interrupt must delete."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def add(self, pod: ProbePod) -> None:
        with self._lock:
            self._pods[pod.uid] = (pod.namespace, pod.name)

    def remove(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def snapshot(self) -> list[tuple[str, str, str]]:
        """``(namespace, name, uid)`` of every pod still in flight."""
        with self._lock:
            return [(ns, name, uid) for uid, (ns, name) in self._pods.items()]


def _kind(exc: KubeError) -> KubeErrorKind:
    try:
        return KubeErrorKind(str(exc.details.get("kind")))
    except ValueError:
        return KubeErrorKind.UNEXPECTED


def _expected_secrets(prober: PodProber, path: ProbePath) -> tuple[tuple[str, ...] | None, str]:
    """The pull secrets the pod must carry, or None with the reason there is no answer."""
    if path.pull_secrets:
        return path.pull_secrets, ""
    where = f"{path.namespace}/{path.service_account}"
    try:
        found = prober.service_account_pull_secrets(path.namespace, path.service_account)
    except KubeError as exc:
        return None, f"reading ServiceAccount {where} failed: {exc.message}"
    if found is None:
        return None, f"ServiceAccount {where} does not exist, so its pods cannot be admitted"
    return found, ""


def _create(
    prober: PodProber, job: ProbeJob, tools: Tools, ledger: ProbeLedger | None = None
) -> tuple[ProbePod | None, dict[str, Any], str]:
    requested: dict[str, Any] = {}
    for _ in range(CREATE_ATTEMPTS):
        requested = probe_pod.manifest(
            job.path,
            image=job.image,
            digest=job.digest,
            nonce=tools.nonce(),
            run_id=job.run_id,
            contract=job.contract,
        )
        if tools.cancel.is_set():
            return None, requested, "interrupted before the probe pod was created"
        name = str(requested["metadata"]["name"])
        if ledger is not None:
            ledger.intend(job.path.namespace, name)  # durable before the create is sent
        try:
            created = prober.create_pod(job.path.namespace, requested)
        except KubeError as exc:
            # the create may have been applied: the record stays for the next run's recover
            return None, requested, f"creating the probe pod failed: {exc.message}"
        if created is not None:
            if ledger is not None:
                ledger.created(created.namespace, created.name, created.uid)
            return created, requested, ""
        if ledger is not None:  # the name was taken by a pod that is not ours
            ledger.removed(job.path.namespace, name)
    return None, requested, f"{CREATE_ATTEMPTS} probe pod names in a row were already taken"


def _terminated(pod: ProbePod) -> str:
    ended = pod.observation.container_terminated if pod.observation is not None else ()
    if not ended:
        return ""
    first = ended[0]
    text = f"the probe container exited {first.exit_code} ({first.reason or 'no reason'})"
    message = " ".join(first.message.split())
    return f"{text}: {message[:400]}" if message else text


def _final(
    pod: ProbePod, requested: Mapping[str, Any], expected: tuple[str, ...], **extra: Any
) -> Observation:
    drift = (
        ()
        if pod.deleted
        else probe_pod.identity_drift(requested, pod, expected_pull_secrets=expected)
    )
    blocker = probe_verdict.permanent_blocker(pod)
    permanent = f"{blocker.code.value}: {blocker.reason}: {blocker.message}" if blocker else ""
    return Observation(
        created=True,
        drift=drift,
        phase=pod.phase,
        permanent=permanent,
        terminated=_terminated(pod),
        image_id=pod.image_id,
        vanished=pod.deleted,
        **extra,
    )


def _observe(
    prober: PodProber,
    created: ProbePod,
    requested: Mapping[str, Any],
    expected: tuple[str, ...],
    deadline_seconds: float,
    tools: Tools,
) -> tuple[Observation, ProbePod]:
    first = probe_pod.identity_drift(requested, created, expected_pull_secrets=expected)
    if first:  # §9.4 step 2: the create response already differs
        return Observation(created=True, drift=first, phase=created.phase), created
    ns, name, uid = created.namespace, created.name, created.uid

    def until(pod: ProbePod) -> bool:
        return pod.uid != uid or bool(
            probe_verdict.stop_reason(pod, requested, expected_pull_secrets=expected)
        )

    start, last, failures = tools.clock(), created, 0
    while True:
        if tools.cancel.is_set():
            return Observation(created=True, problem="interrupted", phase=last.phase), last
        remaining = None if deadline_seconds <= 0 else deadline_seconds - (tools.clock() - start)
        if remaining is not None and remaining <= 0:
            return _final(last, requested, expected, deadline_expired=True), last
        window = WINDOW if remaining is None else max(1, min(WINDOW, math.ceil(remaining)))
        try:
            seen = prober.watch_pod(ns, name, timeout_seconds=window, until=until)
        except KubeError as exc:
            failures += 1
            if _kind(exc) in _TRANSIENT and failures <= WATCH_RETRIES:
                tools.sleep(min(2.0**failures, float(WINDOW)))
                continue
            problem = f"watching the probe pod failed: {exc.message}"
            return Observation(created=True, problem=problem, phase=last.phase), last
        if seen is None and _gone(prober, ns, name, uid):  # not even the snapshot: deleted
            return Observation(created=True, vanished=True, phase=last.phase), last
        if seen is not None and seen.uid != uid:  # our pod is gone; the name was reused
            return Observation(created=True, vanished=True, phase=last.phase), last
        if seen is not None:
            last = seen
            if until(seen):
                return _final(seen, requested, expected), seen


def _gone(prober: PodProber, namespace: str, name: str, uid: str) -> bool:
    """Confirmed absent: a 404, or the name now belongs to another UID (§9.4 step 6)."""
    try:
        pod = prober.read_pod(namespace, name)
        if pod is None or pod.uid != uid:
            return True
        if not pod.deleting:
            return False
        prober.watch_pod(namespace, name, timeout_seconds=GONE_WAIT, until=lambda p: p.uid != uid)
        pod = prober.read_pod(namespace, name)
    except KubeError:
        return False
    return pod is None or pod.uid != uid


def cleanup(
    prober: PodProber,
    namespace: str,
    name: str,
    uid: str,
    tools: Tools,
    ledger: ProbeLedger | None = None,
) -> ProbeCleanup:
    """Delete the probe pod with its UID as precondition, then confirm it gone (and then
    forget its ledger record; a pod not confirmed gone stays recorded)."""
    for attempt in range(1, DELETE_ATTEMPTS + 1):
        try:
            prober.delete_pod(namespace, name, uid)  # GONE and CONFLICT: confirmed below
            break
        except KubeError as exc:
            if _kind(exc) not in _TRANSIENT or attempt == DELETE_ATTEMPTS:
                break  # still confirm: the DELETE may have been applied
            tools.sleep(0.5 * attempt)
    if not _gone(prober, namespace, name, uid):
        return ProbeCleanup.FAILED
    if ledger is not None:
        ledger.removed(namespace, name)
    return ProbeCleanup.VERIFIED


def recover(prober: PodProber, ledger: ProbeLedger, tools: Tools | None = None) -> list[str]:
    """Carry the probe pods an earlier, killed run left through to their deletion.

    A recorded pod found under its name with the recorded UID, or with the probe's
    purpose label when the create's answer was never recorded, is deleted with its
    UID as precondition. A 404 (or a pod that is not ours) just drops the record; a
    failed read keeps it for the next run. Returns ``namespace/name`` of each pod the
    records no longer hold.
    """
    tools = tools or Tools()
    done: list[str] = []
    for probe in ledger.pending():
        try:
            pod = prober.read_pod(probe.namespace, probe.name)
        except KubeError:
            continue  # unknown is not absent: keep the record
        ours = pod is not None and (
            pod.uid == probe.uid
            or (probe.uid is None and pod.labels.get(probe_pod.LABEL_PURPOSE) == probe_pod.PURPOSE)
        )
        if pod is None or not ours:
            ledger.removed(probe.namespace, probe.name)
            done.append(f"{probe.namespace}/{probe.name}")
            continue
        state = cleanup(prober, probe.namespace, probe.name, pod.uid, tools, ledger)
        if state is ProbeCleanup.VERIFIED:
            done.append(f"{probe.namespace}/{probe.name}")
    return done


def _record(
    verdict: probe_verdict.Verdict,
    job: ProbeJob,
    *,
    pod: ProbePod | None = None,
    cleanup_state: ProbeCleanup = ProbeCleanup.NOT_CREATED,
) -> ProbeRecord:
    return ProbeRecord(
        status=verdict.status,
        pod=pod.name if pod is not None else None,
        namespace=job.path.namespace,
        node=(pod.node_name or None) if pod is not None else None,
        image_id=(pod.image_id or None) if pod is not None else None,
        reason=f"{verdict.reason.value}: {verdict.detail}",
        cleanup=cleanup_state,
    )


def run_probe(
    prober: PodProber,
    job: ProbeJob,
    *,
    deadline_seconds: float,
    tools: Tools | None = None,
    live: LivePods | None = None,
    ledger: ProbeLedger | None = None,
) -> ProbeRecord:
    """Prove (or fail to prove) that ``job.path`` pulls ``job.digest``; the pod never outlives it.

    Raises:
        KeyboardInterrupt: after the created pod was cleaned up.
    """
    tools = tools or Tools()
    live = live or LivePods()

    def verdict(obs: Observation) -> probe_verdict.Verdict:
        return probe_verdict.decide(obs, digest=job.digest, platform_digest=job.platform_digest)

    expected, problem = _expected_secrets(prober, job.path)
    if expected is None:
        return _record(verdict(Observation(problem=problem)), job)
    created, requested, problem = _create(prober, job, tools, ledger)
    if created is None:
        return _record(verdict(Observation(problem=problem)), job)
    live.add(created)
    obs, last = Observation(created=True, problem="interrupted"), created
    state = ProbeCleanup.FAILED
    try:
        obs, last = _observe(prober, created, requested, expected, deadline_seconds, tools)
    finally:
        state = cleanup(prober, created.namespace, created.name, created.uid, tools, ledger)
        live.remove(created.uid)
    if not job.path.pull_secrets:
        again, _ = _expected_secrets(prober, job.path)
        obs = replace(obs, account_changed=again != expected)
    obs = replace(obs, cleanup=state)
    return _record(verdict(obs), job, pod=last, cleanup_state=state)
