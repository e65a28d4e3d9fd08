"""The Pulumi program under ``pulumi.runtime.set_mocks`` with a recording monitor (pulumi.md §5.1).

Every ``RegisterResource`` request is kept, so the tests assert what the
engine would be asked for: resource types and properties, secretness,
``protect``/``retain_on_delete``/import, and the dependency edges that order
``destroy`` (the controller first).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dill  # type: ignore[import-untyped]  # dill ships no type hints
import pulumi
import pytest
from google.protobuf import json_format

from npa_infra.errors import StackConfigError
from npa_infra.stack import program
from npa_infra.stack.config import StackConfig
from npa_infra.stack.providers import ControllerProvider, SourcePrefixProvider

SECRET_SIG = "4dabf18193072939515e22adb298388d"
PASSWORD = "s3cr3t-robot-password"


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        if args.typ.startswith("pulumi-python:dynamic/skypilot"):
            state.update(controller_name="sky-jobs-controller-npa-0123456789", config_path="/c")
        if args.typ.startswith("pulumi-python:dynamic/storage"):
            state.update(uri=f"s3://{state['bucket']}/{state['prefix']}/{'a' * 64}/", file_count=3)
        return f"{args.name}_id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


class Recorder(pulumi.runtime.mocks.MockMonitor):
    """A monitor that keeps every registration request (pulumi.md §5.1)."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.requests: list[Any] = []

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method's name
        self.requests.append(request)
        return super().RegisterResource(request)

    def by_name(self, name: str) -> Any:
        (found,) = [r for r in self.requests if r.name == name]
        return found

    def props(self, name: str) -> dict[str, Any]:
        return json_format.MessageToDict(self.by_name(name).object)


def _urn(recorder: Recorder, name: str) -> str:
    request = recorder.by_name(name)
    return f"urn:pulumi:dev::npa-infra::pulumi:pulumi:Stack${request.type}::{name}"


def _edges(recorder: Recorder, name: str) -> set[str]:
    request = recorder.by_name(name)
    urns = set(request.dependencies)
    for deps in request.propertyDependencies.values():
        urns.update(deps.urns)
    return {u.rsplit("::", 1)[-1] for u in urns}


CONFIG: dict[str, Any] = {
    "context": "fake-a",
    "namespace": "team-a",
    "serviceAccount": "npa-runner",
    "bucket": "npa-dev-artifacts",
    "registries": [
        {"server": "cr.eu-north1.nebius.cloud", "username": "robot"},
        {"server": "ghcr.io", "username": "bot", "passwordKey": "ghcrPassword"},
    ],
    "controllerPodConfig": {"spec": {"priorityClassName": "npa-controller"}},
}


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    found: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda key, value: found.__setitem__(key, value))
    return found


def run(
    overrides: dict[str, Any] | None = None, *, fingerprint: str = "f" * 64
) -> Iterator[tuple[program.StackResources, Recorder]]:
    """Run the program once under fresh mocks; yield after every registration resolved."""
    recorder = Recorder(Mocks())
    pulumi.runtime.set_mocks(
        Mocks(), project="npa-infra", stack="dev", preview=False, monitor=recorder
    )
    cfg = StackConfig.model_validate({**CONFIG, **(overrides or {})})
    inputs = program.ProgramInputs(
        "dev", cfg, Path("/state/dev"), Path("/src"), fingerprint if cfg.bucket else ""
    )
    passwords = {k: pulumi.Output.secret(PASSWORD) for k in cfg.password_keys}
    holder: list[tuple[program.StackResources, Recorder]] = []

    @pulumi.runtime.test  # type: ignore[misc]  # the SDK's decorator is untyped
    def body() -> pulumi.Output[Any]:
        res = program.build(inputs, passwords=passwords)
        holder.append((res, recorder))
        assert res.controller is not None
        return res.controller.controller_name

    body()
    yield holder[0]


def resolved(output: pulumi.Output[Any]) -> Any:
    """The value and secretness of an Output, after the mocks answered."""

    async def both() -> tuple[Any, bool]:
        return await output.future(), await output.is_secret()

    return asyncio.get_event_loop().run_until_complete(both())


def declared(fn: Callable[[program.StackResources, Recorder], None], **kw: Any) -> None:
    for res, recorder in run(**kw):
        fn(res, recorder)


# -- what is declared ------------------------------------------------------------------------------
def test_program_declares_exact_resource_types() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        kinds = sorted((r.type, r.name) for r in rec.requests if r.type != "pulumi:pulumi:Stack")
        assert kinds == [
            ("kubernetes:core/v1:Namespace", "ns-team-a"),
            ("kubernetes:core/v1:Secret", "pull-team-a-npa-nebius-registry"),
            ("kubernetes:core/v1:Secret", "pull-team-a-npa-registry-1"),
            ("kubernetes:core/v1:ServiceAccount", "sa-team-a"),
            ("kubernetes:rbac.authorization.k8s.io/v1:Role", "role-team-a"),
            ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "rolebinding-team-a"),
            ("pulumi-python:dynamic/skypilot:ControllerConfig", "controller"),
            ("pulumi-python:dynamic/storage:SourcePrefix", "source"),
            ("pulumi:providers:kubernetes", "k8s"),
        ]

    declared(check)


def test_provider_pins_exact_context_and_mutable_secrets() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        assert rec.props("k8s") == {
            "context": "fake-a",
            "namespace": "team-a",
            "enableSecretMutable": "true",
        }
        for name in ("ns-team-a", "pull-team-a-npa-nebius-registry", "sa-team-a"):
            assert rec.by_name(name).provider == f"{_urn(rec, 'k8s')}::k8s_id"

    declared(check)


def test_pull_secret_dockerconfigjson_value_secret() -> None:
    def check(res: program.StackResources, rec: Recorder) -> None:
        props = rec.props("pull-team-a-npa-nebius-registry")
        assert props["type"] == "kubernetes.io/dockerconfigjson"
        assert props["metadata"]["name"] == "npa-nebius-registry"
        assert props["stringData"][SECRET_SIG] == "1b47061264138c4ac30d75fd1eb44270"
        secret = res.pull_secrets[("team-a", "npa-nebius-registry")]
        value, is_secret = resolved(secret.string_data)
        assert is_secret is True
        body = value[".dockerconfigjson"]
        assert '"cr.eu-north1.nebius.cloud"' in body and PASSWORD in body
        assert base64.b64encode(f"robot:{PASSWORD}".encode()).decode() in body

    declared(check)


def test_password_never_in_a_plain_registration() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        for request in rec.requests:
            for key, value in json_format.MessageToDict(request.object).items():
                if PASSWORD in str(value):
                    assert isinstance(value, dict) and SECRET_SIG in value, (request.name, key)

    declared(check)


def test_service_account_references_pull_secrets_by_output() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        props = rec.props("sa-team-a")
        assert props["metadata"] == {
            "name": "npa-runner",
            "namespace": "team-a",
            "labels": {"app.kubernetes.io/managed-by": "npa-infra"},
        }
        assert props["imagePullSecrets"] == [
            {"name": "npa-nebius-registry"},
            {"name": "npa-registry-1"},
        ]
        assert _edges(rec, "sa-team-a") == {
            "ns-team-a",
            "pull-team-a-npa-nebius-registry",
            "pull-team-a-npa-registry-1",
        }

    declared(check)


def test_role_binding_grants_role_to_service_account() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        binding = rec.props("rolebinding-team-a")
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "npa-runner-npa",
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "npa-runner", "namespace": "team-a"}
        ]
        assert _edges(rec, "rolebinding-team-a") == {"ns-team-a", "sa-team-a", "role-team-a"}
        rules = rec.props("role-team-a")["rules"]
        assert any("pods" in r["resources"] and "create" in r["verbs"] for r in rules)

    declared(check)


def test_secret_depends_on_namespace_by_output() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        request = rec.by_name("pull-team-a-npa-nebius-registry")
        urns = list(request.propertyDependencies["metadata"].urns)
        assert [u.rsplit("::", 1)[-1] for u in urns] == ["ns-team-a"]

    declared(check)


def test_controller_depends_on_everything_so_destroy_tears_it_down_first() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        others = {r.name for r in rec.requests} - {
            "controller",
            "npa-infra-dev",
            "k8s",
            "role-team-a",
        }
        assert others <= _edges(rec, "controller")
        props = rec.props("controller")
        assert props["pull_secret_names"] == ["npa-nebius-registry", "npa-registry-1"]
        assert (props["service_account"], props["namespace"]) == ("npa-runner", "team-a")
        assert (props["context"], props["state_dir"], props["stack"]) == (
            "fake-a",
            "/state/dev",
            "dev",
        )
        assert props["pod_config"] == {"spec": {"priorityClassName": "npa-controller"}}

    declared(check)


# -- protection ------------------------------------------------------------------------------------
def test_namespace_protected_source_retained_controller_not() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        ns, source, controller = (rec.by_name(n) for n in ("ns-team-a", "source", "controller"))
        assert (ns.protect, ns.retainOnDelete) == (True, False)
        assert (source.protect, source.retainOnDelete) == (False, True)
        assert (controller.protect, controller.retainOnDelete) == (False, False)
        assert rec.props("source")["delete_objects"] is False

    declared(check)


def test_delete_source_on_destroy_drops_retain() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        assert rec.by_name("source").retainOnDelete is False
        assert rec.props("source")["delete_objects"] is True

    declared(check, overrides={"deleteSourceOnDestroy": True})


def test_adopted_namespace_imported_and_retained() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        ns = rec.by_name("ns-team-a")
        assert (ns.importId, ns.retainOnDelete, ns.protect) == ("team-a", True, False)
        assert rec.props("ns-team-a")["metadata"] == {"name": "team-a"}  # imported as it is

    declared(check, overrides={"adoptNamespaces": True, "protectNamespaces": False})


def test_extra_namespace_gets_secrets_and_account_controller_only_main() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        names = {r.name for r in rec.requests}
        assert {"ns-team-b", "pull-team-b-npa-nebius-registry", "sa-team-b"} <= names
        assert rec.props("controller")["namespace"] == "team-a"
        assert rec.props("pull-team-b-npa-registry-1")["metadata"]["namespace"] == "team-b"

    declared(check, overrides={"extraNamespaces": ["team-b"]})


def test_no_bucket_no_source_no_account_no_rbac() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        names = {r.name for r in rec.requests}
        assert not names & {"source", "sa-team-a", "role-team-a", "rolebinding-team-a"}
        assert rec.props("controller")["service_account"] == ""

    declared(check, overrides={"bucket": "", "serviceAccount": ""})


def test_source_prefix_inputs_carry_fingerprint() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        props = rec.props("source")
        assert (props["bucket"], props["prefix"], props["fingerprint"]) == (
            "npa-dev-artifacts",
            "npa-src/npa",
            "f" * 64,
        )

    declared(check)


# -- dynamic providers pickle into state (pulumi.md §4.2) ------------------------------------------
def test_dynamic_providers_serialized_secret_and_unpickle_clean() -> None:
    def check(_: program.StackResources, rec: Recorder) -> None:
        for name, cls in (("controller", ControllerProvider), ("source", SourcePrefixProvider)):
            field = rec.props(name)["__provider"]
            assert field[SECRET_SIG] == "1b47061264138c4ac30d75fd1eb44270"
            provider = dill.loads(base64.b64decode(field["value"]))
            assert type(provider).__name__ == cls.__name__
            assert provider._env is None  # nothing of the test's world travels into state

    declared(check)


# -- exports -----------------------------------------------------------------------------------------
def test_exports_are_what_submit_consumes(exports: dict[str, Any]) -> None:
    def check(_: program.StackResources, __: Recorder) -> None:
        assert set(exports) == set(program.OUTPUT_KEYS)
        assert exports["context"] == "fake-a"
        assert exports["isolated_config_dir"] == "/state/dev"
        assert resolved(exports["namespace"])[0] == "team-a"
        assert resolved(exports["pull_secret_names"][0])[0] == "npa-nebius-registry"
        assert resolved(exports["controller_name"])[0].startswith("sky-jobs-controller-")
        assert resolved(exports["src_s3_uri"])[0].startswith("s3://npa-dev-artifacts/npa-src/npa/")

    declared(check)


def test_missing_context_refused_before_any_resource() -> None:
    with pytest.raises(StackConfigError, match="npa-infra:context"):
        for _ in run({"context": ""}):
            pass


# -- the plain `pulumi preview -s dev` entry reads the engine's config -------------------------------
def test_main_reads_engine_config_through_same_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exports: dict[str, Any]
) -> None:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NPA_SKYPILOT_ISOLATED_CONFIG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    recorder = Recorder(Mocks())
    pulumi.runtime.set_mocks(
        Mocks(), project="npa-infra", stack="dev", preview=False, monitor=recorder
    )
    for key, value in {
        "context": "fake-a",
        "namespace": "team-a",
        "controllerCpus": "4",
        "registries": '[{"server": "cr.example", "username": "robot"}]',
        "registryPassword": PASSWORD,
    }.items():
        pulumi.runtime.set_config(f"npa-infra:{key}", value)

    @pulumi.runtime.test  # type: ignore[misc]  # the SDK's decorator is untyped
    def body() -> pulumi.Output[Any]:
        program.main()
        return pulumi.Output.from_input(exports["controller_name"])

    body()
    props = recorder.props("controller")
    assert (props["cpus"], props["context"]) == (4.0, "fake-a")
    assert props["state_dir"] == str(tmp_path / "home" / "skypilot-state" / "dev")
    assert recorder.props("pull-team-a-npa-nebius-registry")["stringData"][SECRET_SIG]
