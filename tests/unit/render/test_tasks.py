"""One SkyPilot task document per plan step (dsl.md §6.1, §6.2).

Steps are built directly, so each case states exactly the profile, image and
settings it depends on: resources copying, envs, num_nodes, the kubernetes
config block, registry secrets, the runAsUser guard, the baked-image rule and
image-less steps.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from npa_infra.errors import RenderError
from npa_infra.plan.model import PlanStep
from npa_infra.render import tasks
from npa_infra.render.images import ImageSelection
from npa_infra.render.tasks import RenderSettings, render_task

DIGEST = "sha256:" + "0123456789abcdef" * 4
THIRD_PARTY = "registry.example.com/team/trainer:1.0"
NEBIUS_IMAGE = "cr.eu-north1.nebius.cloud/project/trainer:1.0"
FIRST_PARTY = "ghcr.io/nebius/nebius-physical-ai/npa-workbench:0.12.4"
SRC = "s3://src-bucket/npa-src/npa/abc/"
SHA40 = "0123456789abcdef0123456789abcdef01234567"
DOCKER_SECRETS = ("SKYPILOT_DOCKER_SERVER", "SKYPILOT_DOCKER_USERNAME", "SKYPILOT_DOCKER_PASSWORD")


def make_step(
    state: str = "train",
    *,
    profile: dict[str, Any] | None = None,
    tool_ref: str = "",
    argv: tuple[str, ...] = ("python3", "-c", "print('hi')"),
    shell: str = "",
    iteration: int | None = None,
) -> PlanStep:
    return PlanStep(
        state=state,
        iteration=iteration,
        loop_label="",
        group="",
        argv=() if shell else argv,
        shell=shell,
        tool_ref=tool_ref,
        resources="default",
        resources_profile=profile if profile is not None else {},
        inputs=(),
        outputs=(),
    )


def settings(**overrides: Any) -> RenderSettings:
    base: dict[str, Any] = {"workflow": "wf", "run_id": "run-1", "config": {}}
    base.update(overrides)
    return RenderSettings(**base)


def render(
    profile: dict[str, Any] | None = None, s: RenderSettings | None = None, **step: Any
) -> dict[str, Any]:
    doc, _image = render_task(make_step(profile=profile, **step), s or settings())
    return doc


def k8s(**extra: Any) -> dict[str, Any]:
    return {"cloud": "kubernetes", "image": THIRD_PARTY, **extra}


# -- resources ------------------------------------------------------------------


def test_render_task_profile_extras_only_copied_keys_reach_resources() -> None:
    profile = {
        "cloud": "aws",
        "accelerators": "H100:1",
        "cpus": 8,
        "memory": "32",
        "use_spot": True,
        "region": "us-east-1",
        "image": THIRD_PARTY,
        "num_nodes": 1,
        "deployIfAbsent": True,
        "kubernetes": {"provision_timeout": 60},
        "labels": {"team": "a"},
    }

    resources = render(profile)["resources"]

    assert resources == {
        "cloud": "aws",
        "accelerators": "H100:1",
        "cpus": 8,
        "memory": "32",
        "use_spot": True,
        "region": "us-east-1",
        "image_id": f"docker:{THIRD_PARTY}",
    }


@pytest.mark.parametrize(
    ("cloud", "memory", "expected"),
    [
        ("aws", "32Gi", "32"),
        ("aws", "16G", "16"),
        ("aws", "64", "64"),
        ("kubernetes", "32Gi", "32+"),
        ("kubernetes", "16G", "16+"),
        ("kubernetes", "8+", "8+"),
    ],
    ids=["vm-gi", "vm-g", "vm-bare", "k8s-gi", "k8s-g", "k8s-already-plus"],
)
def test_render_task_memory_suffix_stripped_and_plus_on_kubernetes(
    cloud: str, memory: str, expected: str
) -> None:
    resources = render({"cloud": cloud, "memory": memory, "image": THIRD_PARTY})["resources"]

    assert resources["memory"] == expected


@pytest.mark.parametrize(
    ("cloud", "cpus", "expected"),
    [("aws", 8, 8), ("kubernetes", 8, "8+"), ("kubernetes", "4+", "4+")],
    ids=["vm-unchanged", "k8s-plus", "k8s-already-plus"],
)
def test_render_task_cpus_get_plus_only_on_kubernetes(
    cloud: str, cpus: object, expected: object
) -> None:
    resources = render({"cloud": cloud, "cpus": cpus, "image": THIRD_PARTY})["resources"]

    assert resources["cpus"] == expected


def test_render_task_kubernetes_disk_size_becomes_pod_ephemeral_storage_request() -> None:
    doc = render(k8s(disk_size=200))

    assert "disk_size" not in doc["resources"]
    containers = doc["config"]["kubernetes"]["pod_config"]["spec"]["containers"]
    ray_node = next(c for c in containers if c.get("name") == "ray-node")
    assert ray_node["resources"]["requests"]["ephemeral-storage"] == "200Gi"


def test_render_task_kubernetes_disk_size_merges_into_existing_ray_node_container() -> None:
    pod_config = {
        "spec": {
            "containers": [
                {
                    "name": "ray-node",
                    "resources": {"requests": {"memory": "1Gi"}, "limits": {"cpu": "2"}},
                }
            ]
        }
    }

    doc = render(k8s(disk_size="100Gi", kubernetes={"pod_config": pod_config}))

    containers = doc["config"]["kubernetes"]["pod_config"]["spec"]["containers"]
    assert len(containers) == 1
    assert containers[0]["resources"] == {
        "requests": {"memory": "1Gi", "ephemeral-storage": "100Gi"},
        "limits": {"cpu": "2"},
    }


def test_render_task_disk_size_on_other_cloud_dropped_everywhere() -> None:
    doc = render({"cloud": "aws", "disk_size": 200, "image": THIRD_PARTY})

    assert "disk_size" not in doc["resources"]
    assert "config" not in doc


def test_render_task_profile_pod_config_not_mutated_by_rendering() -> None:
    pod_config: dict[str, Any] = {"spec": {"containers": [{"name": "ray-node"}]}}
    profile = k8s(disk_size=50, kubernetes={"pod_config": pod_config})

    render(profile)

    assert pod_config == {"spec": {"containers": [{"name": "ray-node"}]}}


@pytest.mark.parametrize(
    ("accelerators", "override", "expected"),
    [
        ({"H100": 2}, "", "H100:2"),
        ("H100:2", "", "H100:2"),
        ("H100", "", "H100"),
        ({"H100": 4}, "B200", "B200:4"),
        ("H100:8", "B200", "B200:8"),
        ("H100", "B200", "B200:1"),
        ("H100:8", "B200:2", "B200:2"),
    ],
    ids=[
        "dict",
        "string",
        "bare-name",
        "override-name-keeps-dict-count",
        "override-name-keeps-string-count",
        "override-name-on-bare-name",
        "override-with-count-wins",
    ],
)
def test_render_task_accelerators_normalised_and_env_override_keeps_count(
    accelerators: object, override: str, expected: str
) -> None:
    s = settings(gpu_accelerator=override)

    resources = render(k8s(accelerators=accelerators), s)["resources"]

    assert resources["accelerators"] == expected


def test_render_task_gpu_memory_override_applies_to_gpu_profiles_only() -> None:
    s = settings(gpu_memory="180Gi")

    gpu = render(k8s(accelerators="H100:1", memory="32Gi"), s)["resources"]
    cpu = render(k8s(memory="32Gi"), s)["resources"]

    assert gpu["memory"] == "180+"
    assert cpu["memory"] == "32+"


def test_render_task_image_becomes_docker_image_id() -> None:
    doc = render(k8s())

    assert doc["resources"]["image_id"] == f"docker:{THIRD_PARTY}"
    assert doc["envs"]["NPA_TASK_IMAGE"] == THIRD_PARTY


# -- envs --------------------------------------------------------------------------


def test_render_task_workflow_identity_envs_set() -> None:
    envs = render(k8s(), state="evaluate")["envs"]

    assert envs["NPA_WORKFLOW_NAME"] == "wf"
    assert envs["NPA_WORKFLOW_RUN_ID"] == "run-1"
    assert envs["NPA_WORKFLOW_STATE"] == "evaluate"
    assert envs["AWS_ENDPOINT_URL"] == "https://storage.eu-north1.nebius.cloud"
    assert all(isinstance(v, str) for v in envs.values())


def test_render_task_attempt_id_is_sha256_hex_of_identity() -> None:
    envs = render(k8s())["envs"]

    assert re.fullmatch(r"[0-9a-f]{64}", envs["NPA_WORKFLOW_ATTEMPT_ID"])
    assert envs["NPA_WORKFLOW_ATTEMPT_ID"] == tasks.attempt_id("wf", "run-1", "train")


@pytest.mark.parametrize(
    ("s", "step"),
    [
        (settings(workflow="wf-other"), {}),
        (settings(run_id="run-2"), {}),
        (settings(), {"state": "evaluate"}),
        (settings(), {"iteration": 2}),
    ],
    ids=["workflow", "run-id", "state", "iteration"],
)
def test_render_task_attempt_id_changes_with_each_identity_part(
    s: RenderSettings, step: dict[str, Any]
) -> None:
    baseline = render(k8s())["envs"]["NPA_WORKFLOW_ATTEMPT_ID"]

    assert render(k8s(), s, **step)["envs"]["NPA_WORKFLOW_ATTEMPT_ID"] != baseline


def test_render_task_fence_defaults_to_one() -> None:
    envs = render(k8s())["envs"]

    assert (envs["NPA_WORKFLOW_FENCE_SEQUENCE"], envs["NPA_WORKFLOW_FENCE_ATTEMPT"]) == ("1", "1")


def test_render_task_fence_carries_launch_sequence_and_attempt() -> None:
    envs = render(k8s(), settings(fence_sequence=7, fence_attempt=3))["envs"]

    assert (envs["NPA_WORKFLOW_FENCE_SEQUENCE"], envs["NPA_WORKFLOW_FENCE_ATTEMPT"]) == ("7", "3")


def test_render_task_config_aws_endpoint_replaces_default() -> None:
    s = settings(config={"aws_endpoint_url": "https://s3.example.com"})

    assert render(k8s(), s)["envs"]["AWS_ENDPOINT_URL"] == "https://s3.example.com"


def test_render_task_image_on_kubernetes_gets_cache_defaults_under_tmp() -> None:
    envs = render(k8s())["envs"]

    assert envs["XDG_CACHE_HOME"].startswith("/tmp/")
    assert envs["UV_CACHE_DIR"].startswith("/tmp/")


@pytest.mark.parametrize(
    ("profile", "s"),
    [
        ({"cloud": "aws", "image": THIRD_PARTY}, settings()),
        ({"cloud": "kubernetes"}, settings(src_s3_uri=SRC)),
    ],
    ids=["image-on-vm", "kubernetes-without-image"],
)
def test_render_task_cache_defaults_absent_unless_image_on_kubernetes(
    profile: dict[str, Any], s: RenderSettings
) -> None:
    envs = render(profile, s)["envs"]

    assert "XDG_CACHE_HOME" not in envs
    assert "UV_CACHE_DIR" not in envs


def test_render_task_pod_config_env_sets_cache_default_not_overridden() -> None:
    pod_config = {
        "spec": {
            "containers": [
                {"name": "ray-node", "env": [{"name": "XDG_CACHE_HOME", "value": "/cache/xdg"}]}
            ]
        }
    }

    doc = render(k8s(kubernetes={"pod_config": pod_config}))

    assert "XDG_CACHE_HOME" not in doc["envs"]
    assert doc["envs"]["UV_CACHE_DIR"].startswith("/tmp/")
    env = doc["config"]["kubernetes"]["pod_config"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "XDG_CACHE_HOME", "value": "/cache/xdg"}]


@pytest.mark.parametrize(
    ("tool_ref", "image"),
    [
        ("workbench.isaac_lab.envgen", None),
        ("", "registry.example.com/team/isaac-sim:4.5"),
    ],
    ids=["isaac-tool", "isaac-image"],
)
def test_render_task_isaac_stage_accepts_eula_unless_cleared(
    tool_ref: str, image: str | None
) -> None:
    profile = {"cloud": "kubernetes", **({"image": image} if image else {})}

    on = render(profile, tool_ref=tool_ref)["envs"]
    off = render(profile, settings(accept_eula=False), tool_ref=tool_ref)["envs"]

    assert on["ACCEPT_EULA"] == "Y"
    assert "ACCEPT_EULA" not in off


def test_render_task_non_isaac_stage_no_eula() -> None:
    assert "ACCEPT_EULA" not in render(k8s(), tool_ref="workbench.cosmos.check")["envs"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, "1"), ("true", "1"), ("1", "1"), (False, None), ("false", None), ("", None)],
    ids=["bool-true", "str-true", "str-1", "bool-false", "str-false", "empty"],
)
def test_render_task_source_overlay_sets_npa_src_overlay(
    value: object, expected: str | None
) -> None:
    envs = render(k8s(), settings(config={"source_overlay": value}, src_s3_uri=SRC))["envs"]

    assert envs.get("NPA_SRC_OVERLAY") == expected


def test_render_task_source_overlay_without_uri_refused() -> None:
    with pytest.raises(RenderError, match="overlays NPA source"):
        render(k8s(), settings(config={"source_overlay": True}))


def test_render_task_source_overlay_absent_no_overlay_env() -> None:
    assert "NPA_SRC_OVERLAY" not in render(k8s())["envs"]


def test_render_task_src_uri_and_source_sha_exported() -> None:
    s = settings(src_s3_uri=SRC, config={"source_sha": SHA40})

    envs = render(k8s(), s)["envs"]

    assert envs["NPA_SRC_S3_URI"] == SRC
    assert envs["NPA_SIM2REAL_SOURCE_SHA"] == SHA40


# -- num_nodes and config.kubernetes ---------------------------------------------


@pytest.mark.parametrize(
    ("num_nodes", "expected"),
    [(None, None), (1, None), ("1", None), (2, 2), ("4", 4)],
    ids=["absent", "one", "one-string", "two", "four-string"],
)
def test_render_task_num_nodes_set_only_above_one(num_nodes: object, expected: int | None) -> None:
    profile = k8s(**({} if num_nodes is None else {"num_nodes": num_nodes}))

    doc = render(profile)

    assert doc.get("num_nodes") == expected
    assert "num_nodes" not in doc["resources"]


def test_render_task_kubernetes_block_copies_pod_config_and_timeout_only() -> None:
    pod_config = {"spec": {"priorityClassName": "batch-high"}}
    profile = k8s(
        kubernetes={
            "pod_config": pod_config,
            "provision_timeout": "900",
            "autoscaler": "karpenter",
            "networking": "nodeport",
        }
    )

    doc = render(profile)

    assert doc["config"] == {
        "kubernetes": {
            "pod_config": {"spec": {"priorityClassName": "batch-high"}},
            "provision_timeout": 900,
        }
    }


def test_render_task_without_kubernetes_settings_no_config_block() -> None:
    assert "config" not in render(k8s(cpus=2, memory="4Gi"))


# -- registry secrets -------------------------------------------------------------


def test_render_task_nebius_registry_image_gets_pull_secret_and_docker_secrets() -> None:
    doc = render({"cloud": "kubernetes", "image": NEBIUS_IMAGE})

    pull = doc["config"]["kubernetes"]["pod_config"]["spec"]["imagePullSecrets"]
    assert pull == [{"name": "npa-nebius-registry"}]
    assert doc["secrets"] == {name: f"<{name}>" for name in DOCKER_SECRETS}
    assert doc["secrets"]["SKYPILOT_DOCKER_PASSWORD"] == "<SKYPILOT_DOCKER_PASSWORD>"


def test_render_task_existing_pull_secret_not_duplicated() -> None:
    pod_config = {"spec": {"imagePullSecrets": [{"name": "npa-nebius-registry"}]}}

    doc = render(
        {"cloud": "kubernetes", "image": NEBIUS_IMAGE, "kubernetes": {"pod_config": pod_config}}
    )

    pull = doc["config"]["kubernetes"]["pod_config"]["spec"]["imagePullSecrets"]
    assert pull == [{"name": "npa-nebius-registry"}]


@pytest.mark.parametrize(
    "image",
    [THIRD_PARTY, FIRST_PARTY, "cr.nebius.cloud.example.com/team/img:1"],
    ids=["third-party", "ghcr", "lookalike-host"],
)
def test_render_task_other_registry_no_pull_secret_and_no_docker_secrets(image: str) -> None:
    doc = render({"cloud": "kubernetes", "image": image})

    assert "secrets" not in doc
    assert "imagePullSecrets" not in str(doc.get("config", {}))


def test_render_task_secret_env_names_declared_with_placeholders() -> None:
    doc = render(k8s(), settings(secret_env=("HF_TOKEN", "NGC_API_KEY")))

    assert doc["secrets"] == {"HF_TOKEN": "<HF_TOKEN>", "NGC_API_KEY": "<NGC_API_KEY>"}


@pytest.mark.parametrize(
    ("image", "expected"),
    [(NEBIUS_IMAGE, DOCKER_SECRETS), (THIRD_PARTY, ()), (None, ())],
    ids=["nebius", "other", "no-image"],
)
def test_secret_names_for_image_only_nebius_registry(
    image: str | None, expected: tuple[str, ...]
) -> None:
    assert tasks.secret_names_for_image(image) == expected


# -- runAsUser guard ------------------------------------------------------------------


@pytest.mark.parametrize(
    "pod_config",
    [
        {"spec": {"securityContext": {"runAsUser": 0}}},
        {"spec": {"containers": [{"name": "ray-node", "securityContext": {"runAsUser": 0}}]}},
    ],
    ids=["pod-level", "container-level"],
)
@pytest.mark.parametrize(
    "image",
    [FIRST_PARTY, "registry.example.com/mirror/npa-cosmos:0.12.4"],
    ids=["default-registry", "pinned-name-on-mirror"],
)
def test_render_task_run_as_root_on_first_party_image_raises_render_error(
    pod_config: dict[str, Any], image: str
) -> None:
    profile = {"cloud": "kubernetes", "image": image, "kubernetes": {"pod_config": pod_config}}

    with pytest.raises(RenderError, match=r"runAsUser: 0") as info:
        render(profile)

    assert "'train'" in info.value.message


@pytest.mark.parametrize(
    ("image", "user"),
    [(THIRD_PARTY, 0), (FIRST_PARTY, 1000)],
    ids=["third-party-root", "first-party-non-root"],
)
def test_render_task_run_as_user_allowed_cases_render(image: str, user: int) -> None:
    pod_config = {"spec": {"securityContext": {"runAsUser": user}}}
    profile = {"cloud": "kubernetes", "image": image, "kubernetes": {"pod_config": pod_config}}

    doc = render(profile)

    assert doc["config"]["kubernetes"]["pod_config"]["spec"]["securityContext"] == {
        "runAsUser": user
    }


# -- require_baked_npa ---------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/team/stage:1.0",
        f"stage@{DIGEST}",
        "registry.example.com/team/stage@sha256:" + "a" * 63,
    ],
    ids=["tag", "unqualified-digest", "short-digest"],
)
def test_render_task_baked_npa_mutable_image_raises_render_error(image: str) -> None:
    s = settings(config={"require_baked_npa": "1", "source_sha": SHA40})

    with pytest.raises(RenderError) as info:
        render({"cloud": "kubernetes", "image": image}, s, state="stage-01")

    assert info.value.message == (
        "planned step 'stage-01' requires a registry-qualified immutable image "
        "because config.require_baked_npa is enabled"
    )


def test_render_task_baked_npa_image_less_step_raises_render_error() -> None:
    s = settings(config={"require_baked_npa": "1", "source_sha": SHA40}, src_s3_uri=SRC)

    with pytest.raises(RenderError, match="requires a registry-qualified immutable image"):
        render({"cloud": "kubernetes"}, s)


@pytest.mark.parametrize(
    ("config", "module"),
    [
        ({"require_baked_npa": "1", "source_sha": SHA40}, "npa.cli.main"),
        (
            {
                "require_baked_npa": "1",
                "source_sha": SHA40,
                "baked_npa_import": "npa.workflows.sim2real.stage",
            },
            "npa.workflows.sim2real.stage",
        ),
    ],
    ids=["default-import", "narrow-stage-import"],
)
def test_render_task_baked_npa_pinned_image_renders_verifying_setup(
    config: dict[str, str], module: str
) -> None:
    image = f"registry.example.com/team/stage@{DIGEST}"

    doc = render({"cloud": "kubernetes", "image": image}, settings(config=config))

    assert doc["resources"]["image_id"] == f"docker:{image}"
    assert f"import {module}" in doc["setup"]
    assert "pip install" not in doc["setup"]


@pytest.mark.parametrize("flag", ["0", "false", "", False], ids=["zero", "false", "empty", "bool"])
def test_render_task_baked_npa_disabled_mutable_image_renders(flag: object) -> None:
    doc = render(k8s(), settings(config={"require_baked_npa": flag}))

    assert doc["resources"]["image_id"] == f"docker:{THIRD_PARTY}"
    assert "pip install" in doc["setup"]


# -- image-less steps -------------------------------------------------------------------


def test_render_task_image_less_step_without_src_uri_raises_naming_step() -> None:
    with pytest.raises(RenderError) as info:
        render({"cloud": "kubernetes"}, state="aggregate-captions")

    assert info.value.message == (
        "planned step 'aggregate-captions' has no workbench image and NPA_SRC_S3_URI is unset"
    )


def test_render_task_image_less_tool_without_src_uri_raises() -> None:
    with pytest.raises(RenderError, match="planned step 'caption'"):
        render({"cloud": "kubernetes"}, state="caption", tool_ref="workbench.token_factory.caption")


def test_render_task_global_no_image_without_src_uri_raises() -> None:
    s = settings(selection=ImageSelection(global_image="none"))

    with pytest.raises(RenderError, match="NPA_SRC_S3_URI is unset"):
        render(k8s(), s)


def test_render_task_image_less_step_with_src_uri_renders_without_image() -> None:
    doc = render({"cloud": "kubernetes"}, settings(src_s3_uri=SRC))

    assert "image_id" not in doc["resources"]
    assert "NPA_TASK_IMAGE" not in doc["envs"]
    assert doc["envs"]["NPA_SRC_S3_URI"] == SRC


# -- document shape ----------------------------------------------------------------------


def test_render_task_document_every_key_present_and_no_file_mounts() -> None:
    profile = k8s(num_nodes=2, kubernetes={"provision_timeout": 60})

    doc = render(profile, settings(secret_env=("HF_TOKEN",)))

    assert set(doc) == {
        "name",
        "resources",
        "envs",
        "run",
        "num_nodes",
        "config",
        "setup",
        "secrets",
    }
    assert list(doc)[:3] == ["name", "resources", "envs"]


def test_render_task_document_keys_in_dsl_order() -> None:
    # dsl.md §6.1: "Each step document has these keys, in this order".
    documented = ["name", "resources", "envs", "run", "num_nodes", "config", "setup", "secrets"]
    profile = k8s(num_nodes=2, kubernetes={"provision_timeout": 60})

    doc = render(profile, settings(secret_env=("HF_TOKEN",)))

    assert list(doc) == documented


def test_render_task_argv_run_script_execs_shell_quoted_argv() -> None:
    doc = render(k8s(), argv=("python3", "-c", "print('a b')", "s3://b/k"))

    assert "set -euo pipefail" in doc["run"]
    assert "/etc/profile.d" in doc["run"]
    assert doc["run"].rstrip().splitlines()[-1] == (
        "exec python3 -c 'print('\"'\"'a b'\"'\"')' s3://b/k"
    )


def test_render_task_shell_run_script_uses_non_login_bash_c() -> None:
    doc = render(k8s(), shell="echo $HOME && ls")

    last = doc["run"].rstrip().splitlines()[-1]
    assert last == "exec bash -c 'echo $HOME && ls'"
    assert "bash -l" not in doc["run"]


def test_render_task_returns_resolved_image() -> None:
    _doc, image = render_task(make_step(profile=k8s()), settings())

    assert image == THIRD_PARTY
