"""Resource profiles: their shape, and every rendered field checked as SkyPilot 0.12.2 checks it.

A profile value is judged in the form the renderer emits (``render.tasks``):
``memory`` loses a ``Gi``/``G`` suffix, on Kubernetes ``cpus`` and ``memory``
gain a trailing ``+`` and ``disk_size`` becomes an ``ephemeral-storage``
request in GiB. The rules then mirror SkyPilot 0.12.2's own parsing
(``sky/resources.py`` ``_set_cpus``/``_set_memory``/``_set_accelerators``,
``sky/utils/resources_utils.py`` ``parse_memory_resource``,
``sky/utils/schemas.py``), so a value that passes here is one SkyPilot accepts.
npa-infra is stricter in a few places, each marked: non-finite numbers, a
fractional or zero accelerator count, a name that reads as ``NAMExCOUNT``, and a
disk size that would not render to a Kubernetes quantity.

Literal values are checked once per profile (``check_profiles``); values
holding tokens are checked after resolution, per state (``check_resolved``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from npa_infra.spec import tokens
from npa_infra.spec.model import Spec, State
from npa_infra.spec.parse import Collector, suggest
from npa_infra.spec.source import PathKey

__all__ = [
    "CLOUDS",
    "DEPLOY_KEYS",
    "PROFILE_KEYS",
    "check_profiles",
    "check_resolved",
    "num_nodes",
    "problem",
]

PROFILE_KEYS = frozenset(
    [
        "cloud",
        "accelerators",
        "cpus",
        "memory",
        "disk_size",
        "use_spot",
        "region",
        "image",
        "num_nodes",
        "kubernetes",
        "deployIfAbsent",
    ]
)
DEPLOY_KEYS = frozenset(
    [
        "clusterName",
        "context",
        "project",
        "skipS3",
        "cpuNodes",
        "cpuPlatform",
        "cpuPreset",
        "gpuNodes",
        "gpuPlatform",
        "gpuPreset",
    ]
)
# sky/skylet/constants.py ALL_CLOUDS (0.12.2); the schema compares case-insensitively
CLOUDS = (
    "aws",
    "azure",
    "gcp",
    "ibm",
    "lambda",
    "scp",
    "oci",
    "kubernetes",
    "runpod",
    "vast",
    "vsphere",
    "cudo",
    "fluidstack",
    "paperspace",
    "primeintellect",
    "do",
    "nebius",
    "ssh",
    "slurm",
    "hyperbolic",
    "seeweb",
    "shadeform",
    "yotta",
    "mithril",
    "verda",
)
# sky/skylet/constants.py MEMORY_SIZE_UNITS, in GiB
_UNITS = {
    "kb": 2**-20,
    "ki": 2**-20,
    "mb": 2**-10,
    "mi": 2**-10,
    "gb": 1.0,
    "gi": 1.0,
    "tb": 2**10,
    "ti": 2**10,
    "pb": 2**20,
    "pi": 2**20,
}
_CHECKED = ("cloud", "accelerators", "cpus", "memory", "disk_size", "use_spot", "region", "image")
_ACC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_NAME_TIMES_COUNT = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9-]*\d)[xX*](?P<count>\d+)")
_COUNT_TIMES_NAME = re.compile(r"(?P<count>\d+)\s*[xX*]\s*(?P<name>[A-Za-z][A-Za-z0-9_.-]*)")

Problem = tuple[str, str]  # (message, hint)


def _finite(text: str) -> float | None:
    try:
        value = float(text)
    except (ValueError, TypeError, OverflowError):
        return None
    # npa-infra is stricter: SkyPilot's float() also takes nan and inf
    return value if math.isfinite(value) else None


def _strip_memory(value: object) -> str:
    # the renderer's transform (render.tasks._strip_memory)
    text = str(value).strip()
    for suffix in ("Gi", "G"):
        if text.endswith(suffix):
            return text[: -len(suffix)]
    return text


def _cpus(value: object, k8s: bool) -> Problem | None:
    hint = 'write a positive number such as 4 or 0.5, or "4+" for at least 4'
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return f'cpus must be a number or a string "<number>+", got {value!r}', hint
    text = str(value)
    rendered = f"{text}+" if k8s and not text.endswith("+") else text
    number = _finite(rendered[:-1] if rendered.endswith("+") else rendered)
    if number is None:
        return f'cpus must be a number or a string "<number>+", got {value!r}', hint
    if number <= 0:
        return f"cpus must be positive, got {value!r}", hint
    return None


def _parse_memory(text: str) -> float | None:
    """sky/utils/resources_utils.py parse_memory_resource(allow_plus, allow_x), then _set_memory."""
    body, plus, times = text, "", ""
    if body.endswith("+"):
        body, plus = body[:-1], "+"
    if body.endswith("x"):
        body, times = body[:-1], "x"
    amount = _finite(body)
    if amount is None:
        low = body.lower()
        for unit, scale in _UNITS.items():
            number = _finite(low[: -len(unit)]) if low.endswith(unit) else None
            if number is not None:
                amount = number * scale
                break
    if amount is None:
        return None
    parsed = f"{amount}{plus}{times}"
    # _set_memory strips one trailing '+' or 'x' and needs a number then
    return _finite(parsed[:-1] if parsed.endswith(("+", "x")) else parsed)


def _memory(value: object, k8s: bool) -> Problem | None:
    hint = 'write a size in GiB such as 16, 16Gi, 16GB or "16+" for at least 16'
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return f"memory must be a number or a size such as 16Gi, got {value!r}", hint
    rendered = _strip_memory(value)
    if k8s and not rendered.endswith("+"):
        rendered += "+"
    amount = _parse_memory(rendered)
    if amount is None:
        return f"memory must be a number or a size such as 16Gi, got {value!r}", hint
    if amount <= 0:
        return f"memory must be positive, got {value!r}", hint
    return None


def _disk(value: object) -> Problem | None:
    # npa-infra is stricter: the value renders to a Kubernetes ephemeral-storage
    # request "<N>Gi", so it must be a whole number of GiB (SkyPilot also wants an int)
    hint = "write a whole number of GiB, such as 100 or 100Gi"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return f"disk_size must be a whole number of GiB, got {value!r}", hint
    text = _strip_memory(value)
    if not re.fullmatch(r"\d+", text):
        return f"disk_size must be a whole number of GiB, got {value!r}", hint
    if int(text) < 1:
        return f"disk_size must be positive, got {value!r}", hint
    return None


def _count(raw: object) -> Problem | None:
    if isinstance(raw, bool):
        return f"accelerator count must be an integer, got {raw!r}", "write T:N, e.g. H100:1"
    try:
        n = int(str(raw).strip()) if not isinstance(raw, float) else None
    except ValueError:
        n = None
    if n is None:
        return f"accelerator count must be an integer, got {raw!r}", "write T:N, e.g. H100:1"
    if n < 1:
        return f"accelerator count must be >= 1, got {n}", "request at least one GPU, e.g. H100:1"
    return None


def _accelerator_name(name: str) -> Problem | None:
    shaped = _NAME_TIMES_COUNT.fullmatch(name) or _COUNT_TIMES_NAME.fullmatch(name)
    if shaped:
        # SkyPilot takes 'H100x1' as the name of one custom accelerator; nobody means that
        fixed = f"{shaped.group('name')}:{shaped.group('count')}"
        return f"accelerator '{name}' reads as a name and a count", f"did you mean '{fixed}'?"
    if not _ACC_NAME.fullmatch(name):
        return f"accelerator name {name!r} is not a GPU type", "write T:N, e.g. H100:1"
    return None


def _accelerators(value: object) -> Problem | None:
    hint = "write T:N (e.g. H100:1) or {H100: 1}"
    if isinstance(value, dict):
        if len(value) != 1:
            # SkyPilot's task schema allows one type per resources block; the renderer keeps the first
            return f"accelerators must name exactly one type, got {len(value)}", hint
        name, count = next(iter(value.items()))
        return _accelerator_name(str(name)) or _count(count)
    if not isinstance(value, str):
        return f"accelerators must be a string or a mapping, got {value!r}", hint
    parts = value.split(":")
    if len(parts) > 2:
        # sky/resources.py _set_accelerators: "<name> or <name>:<cnt>"
        return f"accelerators must be <name> or <name>:<count>, got {value!r}", hint
    return _accelerator_name(parts[0].strip()) or (_count(parts[1]) if len(parts) == 2 else None)


def problem(key: str, value: object, *, kubernetes: bool) -> Problem | None:
    """What is wrong with profile field ``key`` = ``value`` once rendered, or None."""
    if value is None or value == "":
        return None  # not rendered
    if key == "cpus":
        return _cpus(value, kubernetes)
    if key == "memory":
        return _memory(value, kubernetes)
    if key == "disk_size":
        return _disk(value)
    if key == "accelerators":
        return _accelerators(value)
    if key == "use_spot" and not isinstance(value, bool):
        return f"use_spot must be true or false, got {value!r}", "write use_spot: true or false"
    if key == "cloud" and (not isinstance(value, str) or value.lower() not in CLOUDS):
        close = "did you mean 'kubernetes'?" if value == "k8s" else suggest(str(value), CLOUDS)
        return f"unknown cloud {value!r}", close or "use cloud: kubernetes"
    if key in ("region", "image") and not isinstance(value, str):
        return f"{key} must be a string, got {value!r}", f"write {key} as text"
    return None


def _has_token(value: object) -> bool:
    if isinstance(value, str):
        return "{{" in value
    if isinstance(value, dict):
        return any(_has_token(k) or _has_token(v) for k, v in value.items())
    return False


def _is_k8s(profile: Mapping[str, Any]) -> bool:
    return str(profile.get("cloud", "")).lower() == "kubernetes"


def _deferred(raw: Mapping[str, Any]) -> list[str]:
    """Fields that can only be judged once tokens resolve (cpus/memory follow a tokened cloud)."""
    cloud_token = _has_token(raw.get("cloud"))
    return [
        k
        for k in _CHECKED
        if k in raw and (_has_token(raw[k]) or (cloud_token and k in ("cpus", "memory")))
    ]


def _check_fields(
    c: Collector,
    path: PathKey,
    profile: Mapping[str, Any],
    keys: list[str],
    state: str | None = None,
) -> None:
    k8s = _is_k8s(profile)
    for key in keys:
        value = profile.get(key)
        found = problem(key, value, kubernetes=k8s)
        if found is None:
            continue
        message, hint = found
        if state is not None:
            message = f"{message} (as resolved for state '{state}')"
        where: PathKey = (*path, key)
        if isinstance(value, dict) and len(value) == 1:
            where = (*where, str(next(iter(value))))  # at the one {TYPE: N} entry
        c.error(where, message, hint, state=state)


def check_resolved(
    c: Collector, name: str, raw: Mapping[str, Any], profile: Mapping[str, Any], state: str
) -> None:
    """Check the fields of profile ``name`` that held tokens, as resolved for ``state``."""
    keys = _deferred(raw)
    if keys:
        _check_fields(c, ("resources", name), profile, keys, state)


def _profile_shape(c: Collector, path: PathKey, profile: dict[str, Any]) -> None:
    for key in profile:
        if key not in PROFILE_KEYS:
            c.warn(
                (*path, str(key)),
                f"unknown resource profile key '{key}' is ignored",
                suggest(str(key), PROFILE_KEYS) or f"known keys: {', '.join(sorted(PROFILE_KEYS))}",
            )
    k8s = profile.get("kubernetes")
    if isinstance(k8s, dict):
        for key in k8s:
            if key not in ("pod_config", "provision_timeout"):
                c.warn(
                    (*path, "kubernetes", str(key)),
                    f"kubernetes.{key} is not rendered",
                    "only pod_config and provision_timeout reach the SkyPilot task",
                )
    deploy = profile.get("deployIfAbsent")
    if deploy is None or deploy is True:
        return
    if not isinstance(deploy, dict):
        c.error(
            (*path, "deployIfAbsent"),
            f"deployIfAbsent must be true or a mapping, got {deploy!r}",
            "use deployIfAbsent: true, or a mapping such as {clusterName: x, context: y}",
        )
        return
    unknown = [str(k) for k in deploy if k not in DEPLOY_KEYS]
    if unknown:
        c.error(
            (*path, "deployIfAbsent"),
            "unknown deployIfAbsent field(s): " + ", ".join(f"'{k}'" for k in unknown),
            f"allowed: {', '.join(sorted(DEPLOY_KEYS))}",
            at=(*path, "deployIfAbsent", unknown[0]),
        )


def check_profiles(spec: Spec, c: Collector) -> None:
    """Shape and literal field values of every profile (dsl.md §1.4, phase 6)."""
    for name, profile in spec.resources.items():
        path: PathKey = ("resources", name)
        _profile_shape(c, path, profile)
        later = _deferred(profile)
        _check_fields(c, path, profile, [k for k in _CHECKED if k in profile and k not in later])
        if "num_nodes" in profile:
            nn = profile["num_nodes"]
            if isinstance(nn, bool):
                c.error(
                    (*path, "num_nodes"),
                    "num_nodes must be an integer, not a bool",
                    "write num_nodes: 1 (or more, up to 32)",
                )
            elif not (isinstance(nn, str) and "{{" in nn):
                _check_nodes(c, (*path, "num_nodes"), nn, None)  # tokens: per state (num_nodes)
        k8s = profile.get("kubernetes")
        if k8s is not None and not isinstance(k8s, dict):
            c.error(
                (*path, "kubernetes"),
                "kubernetes must be a mapping with pod_config / provision_timeout",
                "use kubernetes: {pod_config: {...}, provision_timeout: 600}",
            )
        elif (
            isinstance(k8s, dict)
            and "pod_config" in k8s
            and not isinstance(k8s["pod_config"], dict)
        ):
            c.error(
                (*path, "kubernetes", "pod_config"),
                "pod_config must be a mapping (a partial Pod manifest)",
                "write a partial Pod manifest, e.g. {spec: {priorityClassName: x}}",
            )


def _check_nodes(c: Collector, path: PathKey, value: object, state: str | None) -> int | None:
    """num_nodes is an integer (or digit string) in 1..32; report and return None otherwise."""
    try:
        n = int(str(value).strip()) if not isinstance(value, (bool, float)) else None
    except ValueError:
        n = None
    if n is None:
        c.error(
            path,
            f"num_nodes must be an integer, got {value!r}",
            "write num_nodes: 1 (or more, up to 32)",
            state=state,
        )
        return None
    if not 1 <= n <= 32:
        c.error(path, f"num_nodes must be in 1..32, got {n}", "use 1 to 32 nodes", state=state)
        return None
    return n


def num_nodes(spec: Spec, st: State, profile: Mapping[str, Any], c: Collector) -> int:
    """The profile's num_nodes for this state: tokens resolve with the state's params (dsl.md §1.4)."""
    nn = profile.get("num_nodes", 1)
    if not (isinstance(nn, str) and "{{" in nn):
        return nn if isinstance(nn, int) and not isinstance(nn, bool) and 1 <= nn <= 32 else 1
    config = {**spec.config, **st.params}
    try:
        text = tokens.resolve(
            nn, tokens.TokenContext(config=config, run={}, allow_state=False, allow_loop=False)
        )
    except tokens.TokenError:
        return 1  # the token phase reports it at its field
    value = _check_nodes(c, ("resources", st.resources, "num_nodes"), text, st.name)
    return value or 1
