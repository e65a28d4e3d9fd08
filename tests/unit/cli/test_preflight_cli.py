"""``preflight-images`` and submit's image gate through the real typer app (cli.md §1.3, §1.4).

The registry is ``tests/unit/cli/conftest.py``'s ``FakeRegistry``: every image
is ``ok`` unless a test sets an answer. Exit codes, ``json.loads(stdout)`` and
stderr are asserted (style.md rule 18).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from npa_infra.catalog import images as pins
from npa_infra.cli.main import app
from npa_infra.registry.models import CheckStatus, ManifestCheck
from npa_infra.testing import kube as fakekube
from npa_infra.testing.registry import FakeRegistry, fake_digest
from npa_infra.workflow.target.services import Services
from tests.unit.cli.conftest import CliFakeProber

REPO = Path(__file__).resolve().parents[3]
TESTING = REPO / "workflows" / "testing"
LINEAR = TESTING / "linear-chain.yaml"
LOOP_DECISION = TESTING / "loop-decision.yaml"
ROW_KEYS = {
    "image",
    "status",
    "http_status",
    "error_code",
    "detail",
    "remedy",
    "digest",
    "platform_digest",
    "steps",
    "probe",
}
PROBE_KEYS = {"status", "pod", "namespace", "node", "image_id", "reason", "cleanup"}
INFRA = ("--infra", "k8s/ctx")
WORKBENCH = pins.catalog_image("npa-workbench", pins.DEFAULT_REGISTRY)
VIEWER = pins.catalog_image("npa-viewer", pins.DEFAULT_REGISTRY)
ISAAC = pins.catalog_image("npa-isaac-lab", pins.DEFAULT_REGISTRY)

Invoke = Callable[..., Result]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "npa-home"))
    for name in ("NPA_TOOL_CATALOG", "NPA_REGISTRY", "NPA_SRC_S3_URI", "NPA_DEBUG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def npa(cli_services: Services) -> Invoke:
    runner = CliRunner()

    def invoke(*args: object, services: Services | None = None) -> Result:
        return runner.invoke(
            app,
            ["workbench", "workflow", *map(str, args)],
            obj=services or cli_services,
            catch_exceptions=False,
        )

    return invoke


def _not_found(image: str) -> ManifestCheck:
    return ManifestCheck(
        CheckStatus.NOT_FOUND, "404 MANIFEST_UNKNOWN", "push it", 404, "MANIFEST_UNKNOWN"
    )


# -- preflight-images ---------------------------------------------------------------------


def test_preflight_images_json_object_with_rows_every_branch_exit_0(
    npa: Invoke, fake_registry: FakeRegistry, fake_prober: CliFakeProber
) -> None:
    result = npa("preflight-images", LOOP_DECISION, *INFRA, "--json")

    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert set(payload) == {"status", "platform", "rows"}
    assert (payload["status"], payload["platform"]) == ("passed", "linux/amd64")
    rows = payload["rows"]
    assert all(set(r) == ROW_KEYS for r in rows)
    assert all(set(r["probe"]) == PROBE_KEYS for r in rows)
    assert {(r["probe"]["status"], r["probe"]["cleanup"]) for r in rows} == {
        ("compatible", "verified")
    }
    assert fake_prober.opened == ["ctx"]
    assert len(fake_prober.created) == 3 and fake_prober.pods == {}
    by_image = {r["image"]: r for r in rows}
    assert set(by_image) == {ISAAC, WORKBENCH, VIEWER}  # publish only on promote_checkpoint
    assert by_image[VIEWER]["steps"] == ["publish"]
    assert by_image[WORKBENCH]["digest"] == fake_digest(WORKBENCH)
    assert sorted(fake_registry.calls) == sorted(by_image)
    assert result.stderr == ""


def test_preflight_images_text_one_line_per_image_with_digest(npa: Invoke) -> None:
    result = npa("preflight-images", LOOP_DECISION, *INFRA)

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("ok ") and fake_digest(lines[0].split()[1]) in lines[0]
    assert "(pulled in-cluster by npa-image-pull-preflight-" in lines[0]
    assert lines[-1] == "preflight: passed (3 image(s), linux/amd64)"


def test_preflight_images_missing_pinned_tag_exit_1_build_command(
    npa: Invoke, fake_registry: FakeRegistry
) -> None:
    fake_registry.answers[VIEWER] = _not_found(VIEWER)

    result = npa("preflight-images", LOOP_DECISION, *INFRA, "--json")
    text = npa("preflight-images", LOOP_DECISION, *INFRA)

    assert result.exit_code == 1
    (row,) = [r for r in json.loads(result.stdout)["rows"] if r["status"] != "ok"]
    assert (row["image"], row["status"], row["http_status"]) == (VIEWER, "not_found", 404)
    assert row["error_code"] == "MANIFEST_UNKNOWN"
    assert row["remedy"] == "build and push the pinned tag: " + pins.build_command("npa-viewer")
    assert text.exit_code == 1
    failing = next(line for line in text.stdout.splitlines() if line.startswith("not_found"))
    assert failing.endswith(pins.build_command("npa-viewer"))


def test_preflight_images_only_unproven_exit_2(npa: Invoke, fake_registry: FakeRegistry) -> None:
    fake_registry.answers[ISAAC] = ManifestCheck(CheckStatus.UNREACHABLE, "dns", "check dns")

    result = npa("preflight-images", LOOP_DECISION, *INFRA, "--json")

    assert result.exit_code == 2
    assert {r["status"] for r in json.loads(result.stdout)["rows"]} == {"ok", "unreachable"}


def test_preflight_images_overrides_distinct_exact_beats_global(
    npa: Invoke, fake_registry: FakeRegistry
) -> None:
    result = npa(
        "preflight-images",
        LINEAR,
        "--image",
        "registry.example.com/all:1",
        "--image-override",
        "workbench.sim2real.split=registry.example.com/split:1",
        "--image-override",
        "workbench.rerun.report=registry.example.com/report:1",
        *INFRA,
        "--json",
    )

    assert result.exit_code == 0, result.stderr
    steps = {r["image"]: r["steps"] for r in json.loads(result.stdout)["rows"]}
    assert steps == {
        "registry.example.com/all:1": ["check-trigger"],
        "registry.example.com/split:1": ["split"],
        "registry.example.com/report:1": ["report"],
    }


def test_preflight_images_insecure_registry_and_stack_reach_the_client(
    npa: Invoke, fake_registry: Any
) -> None:
    result = npa(
        "preflight-images", LINEAR, "--insecure-registry", "reg.lan:5000", *INFRA, "--json"
    )

    assert result.exit_code == 0
    assert fake_registry.opened_with == [{"stack": None, "insecure_hosts": ["reg.lan:5000"]}]
    assert fake_registry.closed


def test_preflight_images_invalid_image_exit_1_never_sent(
    npa: Invoke, fake_registry: FakeRegistry
) -> None:
    result = npa("preflight-images", LINEAR, "--image", "Registry.example.com/UPPER:1", "--json")

    assert result.exit_code == 1
    (row,) = json.loads(result.stdout)["rows"]
    assert row["status"] == "invalid"
    assert fake_registry.calls == []


def test_preflight_images_invalid_spec_json_errors_exit_1(npa: Invoke, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nstates: {}\n")

    result = npa("preflight-images", spec, "--json")

    assert result.exit_code == 1
    assert json.loads(result.stdout)["status"] == "invalid"


def test_preflight_images_bad_override_usage_error_no_json(npa: Invoke) -> None:
    result = npa("preflight-images", LINEAR, "--image-override", "no-equals", "--json")

    assert result.exit_code == 64
    assert not result.stdout.strip().startswith(("[", "{"))
    assert "--image-override" in result.stderr


# -- submit ----------------------------------------------------------------------------------


def _images_in(paths: list[str]) -> set[str]:
    found = set()
    for path in paths:
        for doc in list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))[1:]:
            found.add(str(doc["resources"].get("image_id", "")))
    return found


def test_submit_plan_only_json_real_rows_and_digest_pinned_yaml(
    npa: Invoke, tmp_path: Path
) -> None:
    result = npa("submit", LOOP_DECISION, "--plan-only", "--render-dir", tmp_path / "out", "--json")

    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["status"] == "PLANNED"
    preflight = payload["preflight"]
    # cli.md §1.4: plan-only creates no probe pod, so the Kubernetes pulls stay unproven
    assert preflight["decision"] == "unproven"
    assert {r["image"] for r in preflight["checks"]} == {ISAAC, WORKBENCH, VIEWER}
    assert {r["status"] for r in preflight["checks"]} == {"target_pull_unverified"}
    assert all("plan-only" in r["detail"] for r in preflight["checks"])
    rendered = _images_in([j["path"] for j in payload["skypilot_yaml"]])
    assert rendered
    assert all("@sha256:" in image for image in rendered)
    assert not any(":0.12.4" in image for image in rendered)
    assert f"docker:{WORKBENCH.rsplit(':', 1)[0]}@{fake_digest(WORKBENCH)}" in rendered


def test_submit_plan_only_missing_image_exit_1_reported(
    npa: Invoke, fake_registry: FakeRegistry, tmp_path: Path
) -> None:
    fake_registry.answers[WORKBENCH] = _not_found(WORKBENCH)

    result = npa("submit", LOOP_DECISION, "--plan-only", "--render-dir", tmp_path / "out", "--json")
    text = npa("submit", LOOP_DECISION, "--plan-only", "--render-dir", tmp_path / "out")

    assert result.exit_code == 1
    preflight = json.loads(result.stdout)["preflight"]
    assert preflight["decision"] == "failed"
    assert [r["status"] for r in preflight["checks"] if r["image"] == WORKBENCH] == ["not_found"]
    assert text.exit_code == 1
    assert "image preflight: failed" in text.stdout


def test_submit_plan_only_no_preflight_images_skipped_tags_kept(
    npa: Invoke, fake_registry: FakeRegistry, tmp_path: Path
) -> None:
    result = npa(
        "submit",
        LOOP_DECISION,
        "--plan-only",
        "--no-preflight-images",
        "--render-dir",
        tmp_path / "out",
        "--json",
    )

    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["preflight"] == {
        "decision": "skipped",
        "checks": [],
        "reason": "--no-preflight-images",
    }
    assert fake_registry.calls == []
    assert f"docker:{WORKBENCH}" in _images_in([j["path"] for j in payload["skypilot_yaml"]])


@pytest.mark.parametrize(
    ("status", "json_out"),
    [
        (CheckStatus.NOT_FOUND, True),
        (CheckStatus.FORBIDDEN, False),
        (CheckStatus.UNREACHABLE, True),
    ],
    ids=["not-found-json", "forbidden-text", "unreachable-json"],
)
def test_submit_live_failing_image_refused_before_launch_exit_1(
    npa: Invoke,
    fake_registry: FakeRegistry,
    cli_services: Services,
    status: CheckStatus,
    json_out: bool,
) -> None:
    def never(*args: object) -> NoReturn:
        raise AssertionError("no SkyPilot or cluster may be opened after a failed preflight")

    fake_registry.answers[VIEWER] = ManifestCheck(status, "why", "what next", 404)

    result = npa(
        "submit",
        LOOP_DECISION,
        "--assume-decision",
        "loop_back",
        "--run-id",
        "gate-1",
        "--infra",
        "k8s/ctx",
        *(["--json"] if json_out else []),
        services=dataclasses.replace(cli_services, sky=never, cluster=never),
    )

    assert result.exit_code == 1
    if json_out:
        payload = json.loads(result.stdout)
        assert payload["error"]["category"] == "preflight"
        assert payload["run_id"] == "gate-1"
        assert payload["launch_transaction"] is None
        checks = payload["error"]["details"]["preflight"]["checks"]
        assert [c["status"] for c in checks if c["image"] == VIEWER] == [status.value]
    else:
        assert (
            f"image preflight refused the submit: 1 of 3 image(s) not usable ({VIEWER} {status.value})"
            in result.stderr
        )
        assert "Hint: what next; or submit with --no-preflight-images" in result.stderr


# -- the in-cluster pull probe (kubernetes.md §9) --------------------------------------------


def test_preflight_images_without_infra_target_pull_unverified_exit_2(
    npa: Invoke, fake_prober: CliFakeProber
) -> None:
    result = npa("preflight-images", LOOP_DECISION, "--json")

    assert result.exit_code == 2
    rows = json.loads(result.stdout)["rows"]
    assert {r["status"] for r in rows} == {"target_pull_unverified"}
    assert all("no exact --infra k8s/<context>" in r["detail"] for r in rows)
    assert all(r["probe"] is None and r["digest"] for r in rows)
    assert fake_prober.opened == []  # never the kubeconfig's current context


def test_preflight_images_probe_pull_refused_exit_1_incompatible(
    npa: Invoke, fake_prober: CliFakeProber
) -> None:
    fake_prober.kubelet = fakekube.pull_auth_failure

    result = npa("preflight-images", LOOP_DECISION, *INFRA, "--json")

    assert result.exit_code == 1
    rows = json.loads(result.stdout)["rows"]
    assert {r["status"] for r in rows} == {"probe_incompatible"}
    probe = rows[0]["probe"]
    assert (probe["status"], probe["cleanup"]) == ("incompatible", "verified")
    assert probe["reason"].startswith("permanent_waiting: IMAGE_PULL_AUTH")
    assert "ServiceAccount default/skypilot-service-account" in rows[0]["remedy"]
    assert fake_prober.pods == {}


def test_preflight_images_probe_deadline_indeterminate_exit_2_text(
    npa: Invoke, fake_prober: CliFakeProber
) -> None:
    fake_prober.kubelet = fakekube.stay_pending

    result = npa("preflight-images", LINEAR, *INFRA, "--image-bootstrap-timeout-seconds", "0.01")

    assert result.exit_code == 2
    assert result.stdout.startswith("probe_indeterminate")
    assert "deadline:" in result.stdout
    assert "--image-bootstrap-timeout-seconds 0" in result.stdout
    assert fake_prober.pods == {}  # deleted with its UID after the window


def test_preflight_images_infra_not_kubernetes_usage_error(npa: Invoke) -> None:
    result = npa("preflight-images", LINEAR, "--infra", "nebius", "--json")

    assert result.exit_code == 64
    assert result.stdout == ""  # cli.md §0: a usage error prints no JSON
    assert "Error: --infra 'nebius' is not k8s/<context>" in result.stderr


def test_submit_live_probe_incompatible_refused_before_launch_exit_1(
    npa: Invoke, fake_prober: CliFakeProber, cli_services: Services
) -> None:
    def never(*args: object) -> NoReturn:
        raise AssertionError("no SkyPilot or cluster may be opened after a failed pull probe")

    fake_prober.kubelet = fakekube.fail(1, "npa-probe: sshd is missing")

    result = npa(
        "submit",
        LOOP_DECISION,
        "--assume-decision",
        "loop_back",
        "--run-id",
        "probe-1",
        *INFRA,
        "--json",
        services=dataclasses.replace(cli_services, sky=never, cluster=never),
    )

    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["category"] == "preflight"
    checks = error["details"]["preflight"]["checks"]
    assert {c["status"] for c in checks} == {"probe_incompatible"}
    assert "sshd is missing" in checks[0]["probe"]["reason"]
    assert fake_prober.opened == ["ctx"] and fake_prober.pods == {}


def test_submit_plan_only_never_opens_the_cluster(
    npa: Invoke, fake_prober: CliFakeProber, tmp_path: Path
) -> None:
    result = npa(
        "submit", LOOP_DECISION, "--plan-only", *INFRA, "--render-dir", tmp_path / "o", "--json"
    )

    assert result.exit_code == 0, result.stderr
    checks = json.loads(result.stdout)["preflight"]["checks"]
    assert {c["status"] for c in checks} == {"target_pull_unverified"}
    assert fake_prober.opened == [] and fake_prober.created == []


def test_submit_negative_bootstrap_timeout_usage_error(npa: Invoke) -> None:
    result = npa("submit", LINEAR, "--plan-only", "--image-bootstrap-timeout-seconds", "-1")

    assert result.exit_code == 64
    assert "--image-bootstrap-timeout-seconds" in result.stderr
