"""``skypilot.verify``: each check against a fake cluster, a fake clock, a fake gate, a scripted
``sky check kubernetes`` answer and a tool lookup (cli.md §2.3, issue 17)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_infra.errors import ConfigError, NpaError
from npa_infra.kube.models import KubeErrorKind
from npa_infra.skypilot import verify
from npa_infra.skypilot.checkoutput import CheckResult, CheckVerdict
from npa_infra.skypilot.models import CommandResult, ErrorKind
from npa_infra.skypilot.status import ApiServerState, StatusReport
from tests.support.fakecluster import FakeClock, FakeCluster, kube_error

CTX = "nebius-prod"
SECRET = "t1.canary-iam-token-value"


def kubeconfig_file(tmp_path: Path, namespace: str | None = "team") -> Path:
    body: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        body["namespace"] = namespace
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "contexts": [{"name": CTX, "context": body}, {"name": "other", "context": {}}],
            }
        ),
        encoding="utf-8",
    )
    return path


def gate_report(kubernetes: str | None = "35.0.0", ok: bool = True) -> StatusReport:
    return StatusReport(
        ok=ok,
        bin_path="/venv/bin/sky",
        source=None,
        skypilot_version="0.12.2",
        python="3.11.7",
        kubernetes_client_version=kubernetes,
        fastapi_version="0.119.1",
        click_version="8.1.8",
        api_server=ApiServerState(listening=False, owner_matches=None),
        warnings=() if ok else ("kubernetes 37.0.2 is outside >=20,!=32.0.0,<36: ...",),
        remedies=(),
    )


def sky_answer(verdict: CheckVerdict = CheckVerdict.ENABLED, reason: str = "") -> CheckResult:
    contexts = ((CTX, "enabled."),) if verdict is CheckVerdict.ENABLED else ()
    command = CommandResult(("sky", "check", "kubernetes"), 0, "", "")
    endpoint = "http://127.0.0.1:46580"
    return CheckResult(
        "kubernetes", verdict, reason, contexts, endpoint, ErrorKind.NONE, "", command
    )


class Rig:
    """One verify call's collaborators: kubeconfig, cluster, clock, gate, sky check, tools."""

    def __init__(self, tmp_path: Path) -> None:
        self.kubeconfig = kubeconfig_file(tmp_path)
        self.cluster = FakeCluster(
            CTX, namespaces={"team"}, service_accounts={("team", "skypilot-service-account")}
        )
        self.clock = FakeClock()
        self.gate = gate_report()
        self.env: dict[str, str] = {
            "KUBECONFIG": str(self.kubeconfig),
            "NPA_HOME": str(tmp_path / "npa-home"),
        }
        self.opened: list[tuple[Path, str]] = []
        self.sky: CheckResult | NpaError = sky_answer()
        self.sky_calls = 0
        self.tools = {"socat", "nc", "rsync"}

    def run(self, context: str = CTX, **kwargs: Any) -> verify.VerifyReport:
        def factory(path: Path, ctx: str) -> FakeCluster:
            self.opened.append((path, ctx))
            return self.cluster

        def sky_check() -> CheckResult:
            self.sky_calls += 1
            if isinstance(self.sky, NpaError):
                raise self.sky
            return self.sky

        return verify.verify(
            context,
            env=self.env,
            cluster_factory=factory,
            status_probe=lambda _env: self.gate,
            clock=self.clock,
            sleep=self.clock.sleep,
            sky_check=sky_check,
            which=lambda name: f"/usr/bin/{name}" if name in self.tools else None,
            **kwargs,
        )


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def names(report: verify.VerifyReport) -> dict[str, bool]:
    return {c.name: c.ok for c in report.checks}


def test_verify_every_check_passes_status_ok(rig: Rig) -> None:
    report = rig.run()

    assert report.status == "ok"
    assert report.exit_code == 0
    assert names(report) == {
        "kubeconfig_context": True,
        "readiness": True,
        "namespace": True,
        "service_account": True,
        "kubernetes_client_pin": True,
        "stale_iam_token": True,
        "sky_check_kubernetes": True,
        "api_server": True,
        "client_tools": True,
    }
    assert (report.kubernetes_required, report.kubernetes_enabled) == (True, True)
    assert (report.namespace, report.service_account) == ("team", "skypilot-service-account")
    assert report.readiness.state == "ready"
    assert len(report.readiness.samples) == 3
    assert rig.clock.slept == [5.0, 5.0]
    assert report.sky_version == "0.12.2"
    assert rig.cluster.closed


def test_verify_service_account_detail_says_which_account_and_source(rig: Rig) -> None:
    check = next(c for c in rig.run().checks if c.name == "service_account")

    assert "team/skypilot-service-account" in check.detail
    assert "SkyPilot's default" in check.detail


def test_verify_unknown_context_failed_no_cluster_opened(rig: Rig) -> None:
    report = rig.run("missing")

    assert report.status == "failed"
    assert report.exit_code == 1
    first = report.checks[0]
    assert (first.name, first.ok) == ("kubeconfig_context", False)
    assert "nebius-prod, other" in first.detail
    assert [c.name for c in report.checks] == [
        "kubeconfig_context",
        "kubernetes_client_pin",
        "stale_iam_token",
        "sky_check_kubernetes",
        "client_tools",
    ]
    assert report.readiness.state == "not_run"
    assert report.kubernetes_enabled is False
    assert rig.opened == []
    assert rig.sky_calls == 0  # no context, no isolated state to check it in
    assert report.sky_check.verdict == "not_run"


def test_verify_explicit_kubeconfig_path_used(rig: Rig, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    path = kubeconfig_file(other, namespace=None)
    rig.cluster.namespaces = {"default"}
    rig.cluster.service_accounts = {("default", "skypilot-service-account")}

    report = rig.run(kubeconfig_path=path)

    assert report.status == "ok"
    assert report.kubeconfig == str(path)
    assert report.namespace == "default"
    assert rig.opened == [(path, CTX)]


def test_verify_readiness_forbidden_failed_namespace_not_checked(rig: Rig) -> None:
    rig.cluster.readyz_script = [kube_error(KubeErrorKind.FORBIDDEN, "403 Forbidden", 403)]

    report = rig.run()

    assert names(report)["readiness"] is False
    assert "namespace" not in names(report)
    assert report.readiness.state == "terminal"
    assert report.readiness.samples[0]["status"] == 403
    assert "kubectl --context nebius-prod get --raw=/readyz" in report.checks[1].remedy
    assert rig.clock.slept == []


def test_verify_namespace_missing_failed_with_remedy(rig: Rig) -> None:
    rig.cluster.namespaces = set()

    report = rig.run()

    check = next(c for c in report.checks if c.name == "namespace")
    assert check.ok is False
    assert "namespace 'team'" in check.detail
    assert "create namespace team" in check.remedy
    assert "service_account" not in names(report)
    assert report.kubernetes_enabled is False


def test_verify_default_service_account_absent_ok_skypilot_creates_it(rig: Rig) -> None:
    rig.cluster.service_accounts = set()

    check = next(c for c in rig.run().checks if c.name == "service_account")

    assert check.ok is True
    assert "SkyPilot creates it" in check.detail


def test_verify_named_remote_identity_from_stack_config_missing_failed(
    rig: Rig, tmp_path: Path
) -> None:
    config = tmp_path / "npa-home" / "skypilot-state" / "prod" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"kubernetes": {"remote_identity": "npa-runner"}}), "utf-8")

    report = rig.run(stack="prod")

    check = next(c for c in report.checks if c.name == "service_account")
    assert report.service_account == "npa-runner"
    assert check.ok is False
    assert "team/npa-runner" in check.detail
    assert str(config) in check.detail
    assert report.status == "failed"


def test_verify_service_account_lookup_error_failed(rig: Rig) -> None:
    rig.cluster.fail_on["service_account_exists"] = kube_error(
        KubeErrorKind.SERVER, "500 boom", 500
    )

    check = next(c for c in rig.run().checks if c.name == "service_account")

    assert (check.ok, check.detail) == (False, "500 boom")


def test_verify_kubernetes_37_pin_failed_bootstrap_remedy(rig: Rig) -> None:
    rig.gate = gate_report(kubernetes="37.0.2", ok=False)

    report = rig.run()

    check = next(c for c in report.checks if c.name == "kubernetes_client_pin")
    assert check.ok is False
    assert "37.0.2" in check.detail
    assert "npa skypilot bootstrap" in check.remedy
    assert report.kubernetes_enabled is True
    assert report.status == "failed"


def test_verify_sky_not_installed_pin_failed(rig: Rig) -> None:
    rig.gate = gate_report(kubernetes=None, ok=False)

    check = next(c for c in rig.run().checks if c.name == "kubernetes_client_pin")

    assert check.ok is False
    assert "npa skypilot bootstrap" in check.remedy


@pytest.mark.parametrize("name", verify.STALE_TOKEN_VARS, ids=list(verify.STALE_TOKEN_VARS))
def test_verify_stale_iam_token_failed_unset_remedy_value_hidden(rig: Rig, name: str) -> None:
    rig.env[name] = SECRET

    report = rig.run()

    check = next(c for c in report.checks if c.name == "stale_iam_token")
    assert check.ok is False
    assert name in check.detail
    assert check.remedy == "unset NEBIUS_IAM_TOKEN NPA_NEBIUS_IAM_TOKEN"
    assert SECRET not in report.model_dump_json()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, "skypilot-service-account"),
        ({"kubernetes": {"remote_identity": "SERVICE_ACCOUNT"}}, "skypilot-service-account"),
        ({"kubernetes": {"remote_identity": "LOCAL_CREDENTIALS"}}, "skypilot-service-account"),
        ({"kubernetes": {"remote_identity": "NO_UPLOAD"}}, "skypilot-service-account"),
        ({"kubernetes": {"remote_identity": "npa-runner"}}, "npa-runner"),
        ({"kubernetes": {"remote_identity": [{"other": "a"}, {"nebius-*": "b"}]}}, "b"),
        (
            {
                "kubernetes": {
                    "remote_identity": "global-sa",
                    "context_configs": {CTX: {"remote_identity": "ctx-sa"}},
                }
            },
            "ctx-sa",
        ),
        (
            {
                "kubernetes": {
                    "remote_identity": "global-sa",
                    "pod_config": {"spec": {"serviceAccountName": "pod-sa"}},
                }
            },
            "pod-sa",
        ),
        (
            {
                "kubernetes": {
                    "pod_config": {"spec": {"serviceAccountName": "pod-sa"}},
                    "context_configs": {
                        CTX: {"pod_config": {"spec": {"serviceAccountName": "ctx-pod-sa"}}}
                    },
                }
            },
            "ctx-pod-sa",
        ),
    ],
    ids=[
        "unset",
        "service-account",
        "local-credentials",
        "no-upload",
        "named",
        "context-glob-list",
        "context-config",
        "pod-config",
        "context-pod-config",
    ],
)
def test_effective_service_account_skypilot_rules(config: dict[str, Any], expected: str) -> None:
    assert verify.effective_service_account(config, CTX)[0] == expected


# -- issue 17: SkyPilot's own check and the operator's tools ----------------------------------
def test_verify_sky_check_disabled_failed_kubernetes_not_enabled(rig: Rig) -> None:
    reason = "`socat` is required to setup Kubernetes cloud with `portforward` ... not installed."
    rig.sky = sky_answer(CheckVerdict.DISABLED, reason)

    report = rig.run()

    check = next(c for c in report.checks if c.name == "sky_check_kubernetes")
    assert (check.ok, check.detail) == (False, f"SkyPilot disabled Kubernetes: {reason}")
    assert report.status == "failed"
    assert report.kubernetes_enabled is False  # the cluster answers, but SkyPilot says no
    assert report.sky_check.verdict == "disabled"
    assert report.sky_check.reason == reason


@pytest.mark.parametrize("tool", ["socat", "nc", "rsync"], ids=["socat", "nc", "rsync"])
def test_verify_missing_client_tool_failed_package_named(rig: Rig, tool: str) -> None:
    rig.tools.discard(tool)

    report = rig.run()

    check = next(c for c in report.checks if c.name == "client_tools")
    assert check.ok is False
    assert f"`{tool}` is not on PATH" in check.detail
    assert "sudo apt install" in check.remedy and "brew install" in check.remedy
    assert report.status == "failed"
    assert report.client_tools.missing == [tool]


def test_verify_skypilot_cannot_run_reported_not_raised(rig: Rig) -> None:
    rig.sky = ConfigError("no SkyPilot binary is configured", remedy="run `npa skypilot bootstrap`")

    report = rig.run()

    check = next(c for c in report.checks if c.name == "sky_check_kubernetes")
    assert check.ok is False
    assert "SkyPilot could not run `sky check kubernetes`: no SkyPilot binary" in check.detail
    assert check.remedy == "run `npa skypilot bootstrap`"
    assert "api_server" not in names(report)
    assert report.api_server.reported is False
    assert report.status == "failed"


def test_verify_report_json_keeps_keys_and_adds_sections(rig: Rig) -> None:
    data = rig.run().model_dump(mode="json")

    assert {"status", "kubernetes_enabled", "readiness", "checks", "sky_version"} <= set(data)
    assert data["sky_check"]["verdict"] == "enabled"
    assert data["api_server"] == {
        "endpoint": "http://127.0.0.1:46580",
        "remote": False,
        "reported": True,
    }
    assert data["client_tools"]["ok"] is True
