"""Which pod identities the pull probe proves (kubernetes.md §9.1, skypilot-0.12.md §9.2-§9.4); pure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from npa_infra.errors import RenderError
from npa_infra.gpus import catalog as gpu_catalog
from npa_infra.kube.models import NodeInfo
from preflight import probe_paths
from preflight.probe_paths import Authority, PathProblem, ProbePath
from tests import strategies

GFD = "nvidia.com/gpu.product"


@pytest.mark.parametrize(
    ("cloud", "infra", "expected"),
    [
        ("kubernetes", None, Authority.KUBERNETES),
        ("k8s", None, Authority.KUBERNETES),
        ("Kubernetes", "nebius", Authority.KUBERNETES),
        ("nebius", "k8s/ctx", Authority.VM),
        ("aws", None, Authority.VM),
        (None, "k8s/ctx", Authority.KUBERNETES),
        (None, "nebius", Authority.VM),
        (None, None, Authority.UNKNOWN),
        ("", None, Authority.UNKNOWN),
    ],
    ids=[
        "kubernetes",
        "k8s-alias",
        "cloud-wins-over-infra",
        "vm-cloud-wins-over-k8s-infra",
        "vm-cloud",
        "no-cloud-k8s-infra",
        "no-cloud-vm-infra",
        "no-cloud-no-infra-never-guessed",
        "empty-cloud-no-infra",
    ],
)
def test_authority_table(cloud: str | None, infra: str | None, expected: Authority) -> None:
    profile = {} if cloud is None else {"cloud": cloud}
    assert probe_paths.authority(profile, infra) is expected


def _sky(
    global_pull: list[str] | None = None, context_pull: list[str] | None = None
) -> dict[str, Any]:
    kube: dict[str, Any] = {}
    if global_pull is not None:
        kube["pod_config"] = {"spec": {"imagePullSecrets": [{"name": n} for n in global_pull]}}
    if context_pull is not None:
        kube["context_configs"] = {
            "ctx": {
                "pod_config": {"spec": {"imagePullSecrets": [{"name": n} for n in context_pull]}}
            }
        }
    return {"kubernetes": kube}


def _task(pull: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = dict(spec)
    if pull is not None:
        body["imagePullSecrets"] = [{"name": n} for n in pull]
    return {"spec": body} if body else {}


def _path(sky: dict[str, Any], task: dict[str, Any], **kw: Any) -> ProbePath:
    built = probe_paths.probe_path(
        "s",
        kw.pop("profile", {"cloud": "kubernetes"}),
        task,
        context="ctx",
        namespace="team-a",
        sky_config=sky,
        base_account=kw.pop("base_account", "skypilot-service-account"),
        **kw,
    )
    assert isinstance(built, ProbePath), built
    return built


@pytest.mark.parametrize(
    ("global_pull", "context_pull", "task_pull", "expected"),
    [
        (None, None, None, ()),
        (None, None, ["t"], ("t",)),
        (["g1", "g2"], None, None, ("g1", "g2")),
        (["g"], None, ["t"], ("t",)),
        (["g1", "g2"], ["c"], None, ("c", "g2")),
        (["g"], ["c"], ["t"], ("t",)),
        (None, ["c1", "c2"], None, ("c1", "c2")),
        ([], None, None, ()),
    ],
    ids=[
        "none-anywhere",
        "task-first-declares",
        "global-any-number",
        "task-replaces-global",
        "context-replaces-base0-keeps-rest",
        "context-then-task",
        "context-first-declares-two",
        "global-empty-list",
    ],
)
def test_pull_secrets_overlay_rule_never_a_union(
    global_pull: list[str] | None,
    context_pull: list[str] | None,
    task_pull: list[str] | None,
    expected: tuple[str, ...],
) -> None:
    path = _path(_sky(global_pull, context_pull), _task(task_pull))
    assert path.pull_secrets == expected


@pytest.mark.parametrize(
    ("global_pull", "task_pull", "message"),
    [
        (["g"], ["a", "b"], "lists 2 imagePullSecrets"),
        (["g"], [], "lists 0 imagePullSecrets"),
        ([], ["t"], "overrides an empty imagePullSecrets list"),
    ],
    ids=["two-over-base", "zero-over-base", "one-over-empty-base"],
)
def test_pull_secrets_overlay_shapes_skypilot_rejects_are_render_errors(
    global_pull: list[str], task_pull: list[str], message: str
) -> None:
    with pytest.raises(RenderError, match=message):
        _path(_sky(global_pull), _task(task_pull))


def _layers_result(layers: list[list[str] | None]) -> tuple[str, ...] | None:
    """The rule as written in skypilot-0.12.md §9.3, independently of the merge code."""
    base: list[str] | None = None
    for layer in layers:
        if layer is None:
            continue
        if base is None:
            base = list(layer)
        elif len(layer) != 1 or not base:
            return None
        else:
            base[0] = layer[0]
    return tuple(base or ())


@given(strategies.pull_secret_layers())
def test_pull_secrets_property_matches_the_documented_rule(
    layers: list[list[str] | None],
) -> None:
    expected = _layers_result(layers)
    sky = _sky(layers[0], layers[1])
    try:
        path = _path(sky, _task(layers[2]))
    except RenderError:
        assert expected is None
        return
    assert path.pull_secrets == expected


def test_service_account_task_layer_wins_over_the_base_account() -> None:
    assert _path({}, {}).service_account == "skypilot-service-account"
    assert _path({}, {}, base_account="team-sa").service_account == "team-sa"
    assert _path({}, _task(serviceAccountName="job-sa")).service_account == "job-sa"


def test_placement_copied_as_merged_with_labels_and_distinct_keys() -> None:
    sky = {
        "kubernetes": {
            "pod_config": {"spec": {"tolerations": [{"key": "g", "operator": "Exists"}]}}
        }
    }
    task = {
        "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "nodeSelector": {"pool": "a"},
            "tolerations": [{"key": "t", "operator": "Exists"}],
            "runtimeClassName": "nvidia",
            "priorityClassName": "high",
            "containers": [{"name": "ray-node", "env": [{"name": "X", "value": "1"}]}],
        },
    }

    path = _path(sky, task)

    spec = path.placement.spec()
    assert spec == {
        "nodeSelector": {"pool": "a"},
        "tolerations": [{"key": "g", "operator": "Exists"}, {"key": "t", "operator": "Exists"}],
        "runtimeClassName": "nvidia",
        "priorityClassName": "high",
    }
    assert path.placement.labels == (("kueue.x-k8s.io/queue-name", "q"),)
    other = _path(sky, {"spec": {"nodeSelector": {"pool": "b"}}})
    assert path.key() != other.key()
    assert path.key() == _path(sky, json.loads(json.dumps(task))).key()


def _catalog(*values: str) -> gpu_catalog.GpuCatalog:
    nodes = [NodeInfo(f"n{i}", {GFD: value}, (), True, False, 8) for i, value in enumerate(values)]
    return gpu_catalog.build("ctx", nodes)


def _gpu_term(path: ProbePath) -> dict[str, Any]:
    affinity = path.placement.spec()["affinity"]["nodeAffinity"]
    terms: list[dict[str, Any]] = affinity["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return terms[0]["matchExpressions"][0]  # type: ignore[no-any-return]  # JSON


@pytest.mark.parametrize(
    ("request_", "values", "expected"),
    [
        ("H100:8", ("NVIDIA-H100-80GB-HBM3",), ["NVIDIA-H100-80GB-HBM3"]),
        ("H100-80GB:1", ("NVIDIA-H100-80GB-HBM3",), ["NVIDIA-H100-80GB-HBM3"]),
        ("RTXPRO6000:1", ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",), None),
    ],
    ids=["prefix-of-canonical", "canonical", "alias-group-remapped"],
)
def test_gpu_step_gets_skypilots_node_affinity_and_gpu_toleration(
    request_: str, values: tuple[str, ...], expected: list[str] | None
) -> None:
    path = _path(
        {}, {}, profile={"cloud": "kubernetes", "accelerators": request_}, catalog=_catalog(*values)
    )

    term = _gpu_term(path)
    assert (term["key"], term["operator"]) == (GFD, "In")
    assert term["values"] == (expected or list(values))
    assert dict(probe_paths.GPU_TOLERATION) in path.placement.spec()["tolerations"]


def test_gpu_step_pod_config_terms_appended_after_skypilots() -> None:
    user_term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
    task = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [user_term]
                    }
                }
            }
        }
    }

    path = _path(
        {},
        task,
        profile={"cloud": "kubernetes", "accelerators": "H100:1"},
        catalog=_catalog("NVIDIA-H100-80GB-HBM3"),
    )

    terms = path.placement.spec()["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms[1] == user_term and terms[0]["matchExpressions"][0]["key"] == GFD


@pytest.mark.parametrize(
    ("catalog", "reason"),
    [
        (None, "GPU catalog of context 'ctx' was not read"),
        (_catalog("NVIDIA-A100-SXM4-80GB"), "no GPU node of context 'ctx' matches H100:1"),
    ],
    ids=["no-catalog", "no-match"],
)
def test_gpu_step_without_a_matching_node_is_a_path_problem(
    catalog: gpu_catalog.GpuCatalog | None, reason: str
) -> None:
    built = probe_paths.probe_path(
        "train",
        {"cloud": "kubernetes", "accelerators": {"H100": 1}},
        {},
        context="ctx",
        namespace="ns",
        sky_config={},
        base_account="sa",
        catalog=catalog,
    )

    assert isinstance(built, PathProblem) and built.state == "train"
    assert reason in built.reason


def test_gpu_override_replaces_the_name_keeps_the_count() -> None:
    path = _path(
        {},
        {},
        profile={"cloud": "kubernetes", "accelerators": "A100:2"},
        catalog=_catalog("NVIDIA-H100-80GB-HBM3"),
        gpu_override="H100",
    )
    assert _gpu_term(path)["values"] == ["NVIDIA-H100-80GB-HBM3"]


def test_merge_named_lists_patch_by_name_other_lists_append() -> None:
    base = {
        "spec": {
            "containers": [{"name": "ray-node", "env": [{"name": "A", "value": "1"}]}],
            "volumes": [{"name": "v"}],
        }
    }
    override = {
        "spec": {
            "containers": [{"env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]}],
            "volumes": [{"name": "w"}],
            "tolerations": [{"key": "x"}],
        }
    }

    merged = probe_paths.merge_pod_config(base, override)

    env = merged["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert merged["spec"]["volumes"] == [{"name": "v"}, {"name": "w"}]
    assert merged["spec"]["tolerations"] == [{"key": "x"}]
