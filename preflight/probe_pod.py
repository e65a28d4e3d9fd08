"""The pull-probe pod: its manifest, and whether the cluster kept its identity (kubernetes.md §9.2, §9.3); pure.

``manifest`` builds the pod for one probe path and one digest. Name
``npa-image-pull-preflight-<10 hex sha256(digest NUL contract)>-<16 hex
nonce>`` (52 characters); labels ``npa.nebius.com/owned=true``,
``npa.nebius.com/purpose=image-pull-preflight`` and
``npa.nebius.com/probe-id=<nonce>`` over the path's scheduling labels; the
run id as an annotation (run ids outgrow label values). ``restartPolicy:
Never``, no ServiceAccount token, the path's ServiceAccount, pull secrets and
placement, and one container running the image **by digest** with
``imagePullPolicy: Always`` (a cached image proves nothing about
credentials, §2.4), minimal requests and no GPU. Its ``/bin/sh -c`` script
checks what SkyPilot's bootstrap needs (runtime-reference.md §8): ``/tmp``
and ``$HOME`` writable, ``rsync``, ``service`` and ``sshd`` present, ``sudo -n
true`` for a non-root user, and that arguments reach the script intact; a
failed check exits 1 with one ``npa-probe:`` line, which
``FallbackToLogsOnError`` puts in the termination message.

``identity_drift`` compares the requested manifest with a pod the API
returned (the create response, then every observed state) and lists each
difference: the ServiceAccount; the pull-secret references (when the request
named none, exactly the ServiceAccount's, read before the create); the
placement, where only the two DefaultTolerationSeconds tolerations admission
adds (§3) may differ; the scheduling labels; the image, its pull policy and
the single container. ``nodeName`` is compared only when requested (the
scheduler sets it). Any difference, e.g. a RuntimeClass merging its
``nodeSelector``, means the proof is about another identity: unverified.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from npa_infra.errors import InvariantError
from npa_infra.kube.models import ProbePod
from preflight.probe_paths import PLACEMENT_FIELDS, ProbePath

__all__ = [
    "ANNOTATION_CONTRACT",
    "ANNOTATION_RUN_ID",
    "CONTAINER",
    "LABEL_OWNED",
    "LABEL_PROBE_ID",
    "LABEL_PURPOSE",
    "NAME_PREFIX",
    "PURPOSE",
    "SCRIPT",
    "SCRIPT_ARGS",
    "identity_drift",
    "manifest",
    "pod_name",
]

NAME_PREFIX = "npa-image-pull-preflight-"
PURPOSE = "image-pull-preflight"
LABEL_OWNED = "npa.nebius.com/owned"
LABEL_PURPOSE = "npa.nebius.com/purpose"
LABEL_PROBE_ID = "npa.nebius.com/probe-id"
ANNOTATION_RUN_ID = "npa.nebius.com/run-id"
ANNOTATION_CONTRACT = "npa.nebius.com/bootstrap-contract"
CONTAINER = "probe"
SCRIPT_ARGS = ("npa probe arg", "--two=2")
_NONCE = re.compile(r"^[0-9a-f]{16}$")
_DEFAULT_TOLERATION_KEYS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
)
# One line per failed check on stderr; `set -u` makes an unset HOME a failure, not a guess.
SCRIPT = "\n".join(
    (
        "set -u",
        'fail() { echo "npa-probe: $*" >&2; exit 1; }',
        f'[ "$#" -eq 2 ] && [ "$1" = "{SCRIPT_ARGS[0]}" ] && [ "$2" = "{SCRIPT_ARGS[1]}" ] '
        '|| fail "arguments are not forwarded intact"',
        'f="/tmp/.npa-probe.$$"; ( : > "$f" ) 2>/dev/null && rm -f "$f" || fail "/tmp is not writable"',
        'h="${HOME:-}"; [ -n "$h" ] || fail "HOME is not set"',
        'f="$h/.npa-probe.$$"; ( : > "$f" ) 2>/dev/null && rm -f "$f" '
        '|| fail "HOME ($h) is not writable"',
        "for c in rsync service sshd; do",
        '  command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || [ -x "/sbin/$c" ] '
        '|| fail "$c is missing"',
        "done",
        'if [ "$(id -u)" != 0 ]; then sudo -n true >/dev/null 2>&1 '
        '|| fail "user $(id -u) cannot run sudo -n true"; fi',
        "echo npa-probe-ok",
    )
)


def pod_name(digest: str, nonce: str, contract: str) -> str:
    """``npa-image-pull-preflight-<10 hex of sha256(digest NUL contract)>-<nonce>``.

    Raises:
        InvariantError: ``nonce`` is not 16 lowercase hex characters (a bug in the caller).
    """
    if not _NONCE.match(nonce):
        raise InvariantError(f"probe nonce must be 16 lowercase hex characters, got {nonce!r}")
    stem = hashlib.sha256(f"{digest}\0{contract}".encode()).hexdigest()[:10]
    return f"{NAME_PREFIX}{stem}-{nonce}"


def manifest(
    path: ProbePath,
    *,
    image: str,
    digest: str,
    nonce: str,
    run_id: str,
    contract: str,
) -> dict[str, Any]:
    """The probe pod for ``path``; ``image`` is the reference by digest.

    Raises:
        InvariantError: a bad nonce, or an image not pinned to ``digest``.
    """
    if not image.endswith(f"@{digest}"):
        raise InvariantError(f"the probe runs images by digest only, got {image!r}")
    labels = dict(path.placement.labels)
    labels.update({LABEL_OWNED: "true", LABEL_PURPOSE: PURPOSE, LABEL_PROBE_ID: nonce})
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "serviceAccountName": path.service_account,
        "terminationGracePeriodSeconds": 5,
        **path.placement.spec(),
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": "Always",
                "command": ["/bin/sh", "-c", SCRIPT, "npa-probe", *SCRIPT_ARGS],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        ],
    }
    if path.pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in path.pull_secrets]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(digest, nonce, contract),
            "namespace": path.namespace,
            "labels": labels,
            "annotations": {ANNOTATION_RUN_ID: run_id, ANNOTATION_CONTRACT: contract},
        },
        "spec": spec,
    }


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _admission_default(toleration: object) -> bool:
    """One of the two tolerations DefaultTolerationSeconds adds (kubernetes.md §3)."""
    if not isinstance(toleration, Mapping):
        return False
    seconds = toleration.get("tolerationSeconds")
    finite = (
        isinstance(seconds, int | float)
        and not isinstance(seconds, bool)
        and math.isfinite(seconds)
        and seconds >= 0
    )
    return (
        toleration.get("key") in _DEFAULT_TOLERATION_KEYS
        and toleration.get("operator") == "Exists"
        and toleration.get("effect") == "NoExecute"
        and finite
        and set(toleration) <= {"key", "operator", "effect", "tolerationSeconds"}
    )


def _tolerations(spec: Mapping[str, Any], requested: Sequence[Any]) -> list[str]:
    wanted = {_canonical(t) for t in requested}
    items = spec.get("tolerations")
    return sorted(
        _canonical(t)
        for t in (items if isinstance(items, list) else [])
        if _canonical(t) in wanted or not _admission_default(t)
    )


def _pull_refs(spec: Mapping[str, Any]) -> tuple[str, ...]:
    refs = spec.get("imagePullSecrets")
    return tuple(
        str(r.get("name", ""))
        for r in (refs if isinstance(refs, list) else [])
        if isinstance(r, Mapping)
    )


def _container(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = spec.get("containers")
    first = containers[0] if isinstance(containers, list) and containers else {}
    return first if isinstance(first, Mapping) else {}


def _placement_drift(want: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    requested_tolerations = want.get("tolerations") or []
    for key in PLACEMENT_FIELDS:
        if key == "nodeName" and not want.get(key):
            continue  # the scheduler binds the pod by setting it
        if key == "tolerations":
            a = _canonical(sorted(_canonical(t) for t in requested_tolerations))
            b = _canonical(_tolerations(got, requested_tolerations))
        else:
            a, b = _canonical(want.get(key) or None), _canonical(got.get(key) or None)
        if a != b:
            out.append(f"{key}: requested {_short(want.get(key))}, got {_short(got.get(key))}")
    return out


def _short(value: object) -> str:
    text = _canonical(value) if value not in (None, "", [], {}) else "none"
    return text if len(text) <= 200 else text[:199] + "…"


def identity_drift(
    requested: Mapping[str, Any],
    pod: ProbePod,
    *,
    expected_pull_secrets: Sequence[str],
) -> tuple[str, ...]:
    """Every way ``pod`` differs from the ``requested`` manifest (empty: identity kept)."""
    want = requested.get("spec")
    want = want if isinstance(want, Mapping) else {}
    meta = requested.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    got = pod.spec
    out: list[str] = []
    if pod.name != meta.get("name"):
        out.append(f"name: requested {meta.get('name')}, got {pod.name}")
    if not pod.uid:
        out.append("the API returned no uid")
    labels = meta.get("labels")
    for key, value in (labels if isinstance(labels, Mapping) else {}).items():
        if pod.labels.get(key) != value:
            out.append(f"label {key}: requested {value}, got {pod.labels.get(key)}")
    if got.get("serviceAccountName") != want.get("serviceAccountName"):
        out.append(
            f"serviceAccountName: requested {want.get('serviceAccountName')}, "
            f"got {got.get('serviceAccountName')}"
        )
    refs = _pull_refs(got)
    if refs != tuple(expected_pull_secrets):
        out.append(f"imagePullSecrets: expected {list(expected_pull_secrets)}, got {list(refs)}")
    out += _placement_drift(want, got)
    containers = got.get("containers")
    if not isinstance(containers, list) or len(containers) != 1:
        out.append("the pod does not have exactly the one probe container")
    wanted, seen = _container(want), _container(got)
    if seen.get("image") != wanted.get("image"):
        out.append(f"image: requested {wanted.get('image')}, got {seen.get('image')}")
    if seen.get("imagePullPolicy") != "Always":
        out.append(f"imagePullPolicy: requested Always, got {seen.get('imagePullPolicy')}")
    return tuple(out)
