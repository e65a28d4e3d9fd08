"""``ControllerProvider`` methods called directly: the Kubernetes double, the sky simulator, the journal.

``create``/``update`` check the exact context through the real ``KubeApi``
against the double, then write the isolated directory's generated SkyPilot
config; ``delete`` runs the terminal-run gate over the journal and then the
real ``SkyCli`` against the ``sky`` simulator (skypilot-0.12.md §5.4, §12).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_infra.errors import ConfigError, RunStateError
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.skypilot.models import JobStatus
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.stack.providers import ControllerProvider, controller_pod_config
from tests.integration.skypilot.simenv import Sim, make_sim
from tests.support.fakekube import FakeKube
from tests.support.stackjournal import journal_run


@pytest.fixture
def sim(tmp_path: Path) -> Sim:
    (tmp_path / "sim").mkdir()
    return make_sim(tmp_path / "sim")


@pytest.fixture
def env(sim: Sim, fake_kube: FakeKube, tmp_path: Path) -> dict[str, str]:
    fake_kube.add_service_account("team-a", "npa-runner")  # team-a exists: fake-a's namespace
    return {
        **sim.env,
        "KUBECONFIG": str(fake_kube.kubeconfig),
        "HOME": str(tmp_path / "user"),
        "NPA_HOME": str(tmp_path / "home"),
        "NPA_SKYPILOT_BIN": str(sim.binary),
    }


def no_port_check(binary: Path, isolated: IsolatedDir, env: Mapping[str, str]) -> SkyCli:
    return SkyCli(binary, isolated, env, check_ports=False)


@pytest.fixture
def provider(env: dict[str, str]) -> ControllerProvider:
    return ControllerProvider(sky=no_port_check, env=env)


def props(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "stack": "dev",
        "state_dir": str(tmp_path / "state"),
        "context": "fake-a",
        "namespace": "team-a",
        "service_account": "npa-runner",
        "pull_secret_names": ["npa-nebius-registry"],
        "cpus": 2,
        "memory_gb": 8,
        "pod_config": {"spec": {"priorityClassName": "npa-controller"}},
        "sky_bin": "",
        "__provider": "serialized",
        **extra,
    }


def down_calls(sim: Sim, tmp_path: Path) -> list[list[str]]:
    state = tmp_path / "state" / "sky-runtime" / ".sky"
    if not state.exists():
        return []
    from tests.support.skysim import harness

    return [c["argv"] for c in harness.read_state(state)["calls"] if c["argv"][:1] == ["down"]]


# -- create / update / diff -----------------------------------------------------------------
def test_create_writes_isolated_config_exact_context(
    provider: ControllerProvider, tmp_path: Path, fake_kube: FakeKube
) -> None:
    result = provider.create(props(tmp_path))

    isolated = IsolatedDir(tmp_path / "state")
    config = yaml.safe_load(isolated.config_file.read_text(encoding="utf-8"))
    assert config["kubernetes"] == {
        "allowed_contexts": ["fake-a"],
        "remote_identity": "npa-runner",
        "pod_config": {
            "spec": {
                "priorityClassName": "npa-controller",
                "imagePullSecrets": [{"name": "npa-nebius-registry"}],
                "serviceAccountName": "npa-runner",
            }
        },
    }
    assert config["jobs"]["controller"]["resources"] == {
        "cloud": "kubernetes",
        "cpus": 2,
        "memory": 8,
        "region": "fake-a",
    }
    name = f"sky-jobs-controller-{isolated.user_id({})}"
    assert result.id == name
    assert result.outs is not None
    assert (result.outs["controller_name"], result.outs["config_path"]) == (
        name,
        str(isolated.config_file),
    )
    assert (isolated.home / ".kube" / "config").resolve() == fake_kube.kubeconfig.resolve()
    assert isolated.owner() == "dev"  # claimed: submits of the stack adopt it, never rewrite it


def test_create_refuses_missing_service_account(env: dict[str, str], tmp_path: Path) -> None:
    provider = ControllerProvider(sky=no_port_check, env=env)

    with pytest.raises(ConfigError, match="ServiceAccount team-a/ghost does not exist"):
        provider.create(props(tmp_path, service_account="ghost"))
    assert not (tmp_path / "state" / "config.yaml").exists()


def test_create_refuses_missing_namespace(provider: ControllerProvider, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="namespace team-z does not exist in context fake-a"):
        provider.create(props(tmp_path, namespace="team-z"))


def test_update_rewrites_resources_same_identity(
    provider: ControllerProvider, tmp_path: Path
) -> None:
    created = provider.create(props(tmp_path))
    assert created.outs is not None

    updated = provider.update(created.id, created.outs, props(tmp_path, cpus=4))

    config = yaml.safe_load((tmp_path / "state" / "config.yaml").read_text(encoding="utf-8"))
    assert config["jobs"]["controller"]["resources"]["cpus"] == 4
    assert updated.outs is not None and updated.outs["controller_name"] == created.id


@pytest.mark.parametrize(
    ("change", "replaces"),
    [
        ({"context": "fake-b"}, ["context"]),
        ({"state_dir": "/elsewhere"}, ["state_dir"]),
        ({"cpus": 4}, []),
        ({"pull_secret_names": ["a", "b"]}, []),
    ],
    ids=["context", "state-dir", "cpus", "pull-secrets"],
)
def test_diff_identity_replaces_delete_first(
    provider: ControllerProvider, tmp_path: Path, change: dict[str, Any], replaces: list[str]
) -> None:
    old = props(tmp_path)

    diff = provider.diff("id", old, {**old, **change})

    assert (diff.changes, diff.replaces, diff.delete_before_replace) == (True, replaces, True)


def test_pod_config_keeps_configured_pull_secrets_first() -> None:
    merged = controller_pod_config(
        {"spec": {"imagePullSecrets": [{"name": "mine"}], "serviceAccountName": "theirs"}},
        ["npa-nebius-registry", "mine"],
        "npa-runner",
    )

    assert merged == {
        "spec": {
            "imagePullSecrets": [{"name": "mine"}, {"name": "npa-nebius-registry"}],
            "serviceAccountName": "theirs",
        }
    }
    assert controller_pod_config(None, [], "") == {}


# -- delete: the guarded teardown ------------------------------------------------------------
def test_delete_no_controller_queue_proves_absence_no_down_sent(
    provider: ControllerProvider, sim: Sim, tmp_path: Path
) -> None:
    created = provider.create(props(tmp_path))
    assert created.outs is not None

    provider.delete(created.id, created.outs)  # the queue's ClusterNotUpError: nothing to tear down

    assert down_calls(sim, tmp_path) == []
    assert IsolatedDir(tmp_path / "state").owner() is None  # the claim is released


def test_delete_refused_while_run_active_sky_untouched(
    provider: ControllerProvider, sim: Sim, tmp_path: Path, env: dict[str, str]
) -> None:
    created = provider.create(props(tmp_path))
    assert created.outs is not None
    journal_run(Path(env["NPA_HOME"]), "r-live", status="SUBMITTED")
    journal_run(Path(env["NPA_HOME"]), "r-other-stack", stack="prod", status="SUBMITTED")

    with pytest.raises(RunStateError, match=r"r-live \(SUBMITTED\)") as caught:
        provider.delete(created.id, created.outs)

    assert "--cancel-runs" in caught.value.message
    assert "r-other-stack" not in caught.value.message
    assert down_calls(sim, tmp_path) == []
    assert IsolatedDir(tmp_path / "state").owner() == "dev"  # still the stack's


def test_delete_proceeds_after_cancel_proved_jobs_gone(
    provider: ControllerProvider, sim: Sim, tmp_path: Path, env: dict[str, str]
) -> None:
    created = provider.create(props(tmp_path))
    assert created.outs is not None
    journal_run(
        Path(env["NPA_HOME"]), "r-done", status="SUBMITTED", cancel_outcome="already_absent"
    )
    _launch(sim, env, tmp_path, "CANCELLED")  # the controller is up, its queue all terminal

    provider.delete(created.id, created.outs)

    assert len(down_calls(sim, tmp_path)) == 1


def _launch(sim: Sim, env: dict[str, str], tmp_path: Path, *statuses: str) -> tuple[SkyCli, int]:
    sim.faults({"command": "jobs.launch", "action": "timeline", "statuses": list(statuses)})
    isolated = IsolatedDir(tmp_path / "state")
    cli = SkyCli(sim.binary, isolated, env, check_ports=False)
    task = sim.task()
    assert cli.launch(task, name="npa-busy", infra="k8s/fake-a").accepted
    (job_id,) = cli.queue().job_ids("npa-busy")
    return cli, job_id


def test_delete_running_job_refused_by_queue_gate_sky_down_untouched(
    provider: ControllerProvider, sim: Sim, tmp_path: Path, env: dict[str, str]
) -> None:
    created = provider.create(props(tmp_path))
    assert created.outs is not None
    _, job_id = _launch(sim, env, tmp_path, "RUNNING")

    with pytest.raises(RunStateError, match=rf"job {job_id} 'npa-busy' of user tester \(RUNNING\)"):
        provider.delete(created.id, created.outs)
    assert down_calls(sim, tmp_path) == []


def test_delete_foreign_cancelling_job_drains_then_tears_down(
    env: dict[str, str], sim: Sim, tmp_path: Path
) -> None:
    """A job of another operator, not in this machine's journal, still CANCELLING: the
    delete waits for it on the all-users queue, then the down goes (issue 16)."""
    slept: list[float] = []
    provider = ControllerProvider(sky=no_port_check, env=env, sleep=slept.append)
    created = provider.create(props(tmp_path))
    assert created.outs is not None
    sim.faults(
        {
            "command": "jobs.launch",
            "action": "as_user",
            "user_hash": "alice1",
            "user_name": "alice",
        },
        {
            "command": "jobs.launch",
            "action": "timeline",
            "statuses": ["CANCELLING"] * 3 + ["CANCELLED"],
        },
    )
    cli = SkyCli(sim.binary, IsolatedDir(tmp_path / "state"), env, check_ports=False)
    assert cli.launch(sim.task(), name="theirs", infra="k8s/fake-a").accepted
    sim.faults()

    provider.delete(created.id, created.outs)

    assert len(down_calls(sim, tmp_path)) == 1
    assert len(slept) == 3  # one poll per CANCELLING read
    assert IsolatedDir(tmp_path / "state").owner() is None


def test_delete_skypilot_in_progress_refusal_retried_after_drain(
    provider: ControllerProvider, sim: Sim, tmp_path: Path, env: dict[str, str]
) -> None:
    created = provider.create(props(tmp_path))
    assert created.outs is not None
    _launch(sim, env, tmp_path, "SUCCEEDED")
    sim.faults({"command": "down", "nth": 1, "action": "refuse_down"})
    provider = ControllerProvider(sky=no_port_check, env=env, sleep=lambda _s: None)

    provider.delete(created.id, created.outs)

    assert len(down_calls(sim, tmp_path)) == 2  # refused once, then torn down


def test_delete_after_jobs_terminal_tears_down(
    provider: ControllerProvider, sim: Sim, tmp_path: Path, env: dict[str, str]
) -> None:
    created = provider.create(props(tmp_path))
    assert created.outs is not None
    cli, job_id = _launch(sim, env, tmp_path, "SUCCEEDED")
    statuses = [cli.queue().status_of(job_id) for _ in range(3)]  # one step per queue call
    assert statuses[-1] is JobStatus.SUCCEEDED

    provider.delete(created.id, created.outs)

    assert cli.queue().job_ids("npa-busy") == ()  # the controller and its queue are gone
    assert IsolatedDir(tmp_path / "state").owner() is None  # the claim is released with it


def test_delete_without_sky_binary_refuses_with_remedy(env: dict[str, str], tmp_path: Path) -> None:
    provider = ControllerProvider(sky=no_port_check, env={**env, "NPA_SKYPILOT_BIN": ""})
    state = props(tmp_path)
    IsolatedDir(tmp_path / "state").prepare(env, context="fake-a", controller=ControllerSettings())

    with pytest.raises(ConfigError, match="cannot verify the controller is gone") as caught:
        provider.delete("sky-jobs-controller-x", state)

    assert "npa skypilot bootstrap" in caught.value.remedy


def test_check_requires_identity_fields(provider: ControllerProvider, tmp_path: Path) -> None:
    result = provider.check({}, props(tmp_path, context="", state_dir=""))

    assert sorted(f.property for f in result.failures) == ["context", "state_dir"]


def test_delete_killed_during_sky_down_blocks_launches_until_rerun_finishes(
    provider: ControllerProvider, sim: Sim, tmp_path: Path, env: dict[str, str]
) -> None:
    """The controller's ``sky down`` is journaled before it is sent (faults.md invariant 5):
    the process SIGKILLed mid-down leaves the record, no launch into that state is made
    while it stands, and rerunning the delete finishes the teardown and clears it."""
    from npa_infra.journal import inflight

    created = provider.create(props(tmp_path))
    outs = created.outs
    assert outs is not None
    _launch(sim, env, tmp_path, "SUCCEEDED")
    sim.kill_during("down", lambda: provider.delete(created.id, outs))
    state_dir = tmp_path / "state"
    recorded = inflight.controller_down(state_dir)
    assert recorded is not None and recorded.stack == "dev"

    provider.delete(created.id, outs)  # the rerun of the destroy
    assert inflight.controller_down(state_dir) is None
    assert IsolatedDir(state_dir).owner() is None
