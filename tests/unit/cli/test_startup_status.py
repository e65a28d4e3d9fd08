"""Fast start-up of ``workflow status`` (issue 19, style.md rule 6): each heavy client loads
only where its work happens.

The run is built in-process in the simulator world (``tests/integration/runs/world.py``:
the ``sky`` simulator through the real ``SkyCli``, FakeKube through the real ``KubeApi``).
``status`` then runs in a fresh interpreter (``test_startup``'s child) with the world's
environment and ``NPA_SKYPILOT_BIN`` naming the simulator's wrapper, so the command's
real default ``Services`` reach the simulator and FakeKube; the run's journal names its
state directory. The child reports which heavy modules ended up in ``sys.modules``; the
simulator's call log and FakeKube's request log say which reads were made.

What each status needs: a RUNNING or SUCCEEDED job, one queue read (no pod read: no
``kubernetes``); ``--cached``, nothing at all; a PENDING job, the queue read and ONE pod
list (kubernetes.md §6.1), so ``kubernetes`` loads with that read (and ``pydantic``, which
the client itself imports) and nothing else does. No status path reads S3: a runtime run's
decisions are in its journal, so ``boto3`` never loads, with or without a decision.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.integration.runs.test_runtime import FINISHES, RUNTIME, _decision_key
from tests.integration.runs.test_runtime import _submit as submit_runtime
from tests.integration.runs.world import World, make_world
from tests.support.fakekube import FakeKube
from tests.support.fakekube.pytest_plugin import fake_kube
from tests.support.moto_plugin import moto_server, s3_server
from tests.support.motoserver import MotoS3
from tests.unit.cli.test_startup import _CLI_CHILD, REPO, _run_child

# the doubles' fixtures: FakeKube, and moto's S3 for the decision-routed runtime run
__all__ = ["fake_kube", "moto_server", "s3_server"]

MINIMAL = REPO / "workflows" / "testing" / "minimal.yaml"
STATUS = ("workbench", "workflow", "status")
CLIENTS = {"kubernetes", "boto3", "httpx", "pulumi", "pulumi.automation"}


def _timeline(*statuses: str, **extra: object) -> dict[str, object]:
    """The simulator's script for the next launched job: these statuses, one per queue read."""
    return {"command": "jobs.launch", "action": "timeline", "statuses": list(statuses), **extra}


PENDING = _timeline("PENDING")
AUTH_POD = {
    "command": "jobs.launch",
    "action": "pod_state",
    "task": 0,
    "pod": {
        "phase": "Pending",
        "waiting": {"reason": "ErrImagePull", "message": "failed to pull: 401 Unauthorized"},
    },
}

# Status runs the real drift gate, which looks at SkyPilot's fixed ports; these tests are not
# about them, so each child sees a machine where nothing listens there (issue 31).
_NO_PORTS = (
    "from npa_infra.workflow.target.services import Services\n"
    "from tests.support.freeports import nothing_listens\n"
)
_STATUS_CHILD = _CLI_CHILD.replace("import json, sys\n", "import json, sys\n" + _NO_PORTS).replace(
    'app(args, prog_name="npa")',
    'app(args, prog_name="npa", obj=Services(api_ports=nothing_listens))',
)
assert _STATUS_CHILD.count("nothing_listens") == 2, "test_startup's _CLI_CHILD changed shape"

# ``npa_infra.run_status``, the SDK's entry, in a fresh interpreter
_SDK_STATUS_CHILD = textwrap.dedent(
    """\
    import json, os, sys
    import npa_infra
    from npa_infra.workflow.target.services import Services
    from tests.support.freeports import nothing_listens
    report, heavy, run_id = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    result = npa_infra.run_status(
        run_id, env=os.environ, services=Services(api_ports=nothing_listens)
    )
    with open(report, "w") as fh:
        loaded = [m for m in heavy if m in sys.modules]
        json.dump({"code": result.exit_code, "loaded": loaded, "status": result.status}, fh)
    """
)


@pytest.fixture
def world(tmp_path: Path, fake_kube: FakeKube) -> World:
    """The simulator creates each job's pods in FakeKube, so a pod read has pods to find."""
    return make_world(tmp_path / "world", fake_kube, pods=True)


def _child_env(world: World) -> dict[str, str]:
    return {**world.env, "NPA_SKYPILOT_BIN": str(world.sky_bin)}


def _fresh(world: World, tmp_path: Path, script: str, *args: str) -> dict[str, object]:
    child = tmp_path / f"child-{len(list(tmp_path.glob('child-*')))}"
    child.mkdir()
    return _run_child(script, child, *args, env=_child_env(world))


def _loaded(result: dict[str, object]) -> set[str]:
    found = result["loaded"]
    assert isinstance(found, list)
    return {str(name) for name in found}


def _queue_reads(world: World) -> int:
    return sum(1 for c in world.sim_calls() if c[:2] == ["jobs", "queue"])


def _pod_lists(fake: FakeKube) -> int:
    return len(fake.calls("GET", r"/pods(\?|$)"))


def _launch(world: World, run_id: str, *faults: dict[str, object]) -> None:
    """A one-shot run of ``minimal.yaml`` whose job the simulator scripts with ``faults``."""
    world.faults(*faults)
    result = world.submit(MINIMAL, run_id=run_id)
    assert (result.exit_code, len(result.job_ids)) == (0, 1), result.to_json()


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [(["RUNNING"], "RUNNING"), (["SUCCEEDED"], "SUCCEEDED")],
    ids=["running", "succeeded"],
)
def test_status_of_live_job_fresh_interpreter_reads_queue_only_loads_no_heavy_module(
    tmp_path: Path, world: World, fake_kube: FakeKube, statuses: list[str], expected: str
) -> None:
    _launch(world, "live-1", _timeline(*statuses))
    queues, pods = _queue_reads(world), _pod_lists(fake_kube)

    result = _fresh(world, tmp_path, _STATUS_CHILD, *STATUS, "live-1")

    assert result["code"] == 0
    assert f"status: {expected}" in str(result["stdout"])
    assert (_queue_reads(world) - queues, _pod_lists(fake_kube) - pods) == (1, 0)
    assert result["loaded"] == []


def test_status_sdk_of_running_job_fresh_interpreter_loads_no_heavy_module(
    tmp_path: Path, world: World
) -> None:
    _launch(world, "sdk-1", _timeline("RUNNING"))

    result = _fresh(world, tmp_path, _SDK_STATUS_CHILD, "sdk-1")

    assert (result["code"], result["status"]) == (0, "RUNNING")
    assert result["loaded"] == []


@pytest.mark.parametrize(
    "args", [["cached-1", "--cached"], ["--all", "--cached"]], ids=["run", "all"]
)
def test_status_cached_of_pending_job_fresh_interpreter_reads_nothing_loads_no_heavy_module(
    tmp_path: Path, world: World, fake_kube: FakeKube, args: list[str]
) -> None:
    """Without --cached this job's pods would be read; with it nothing is, and nothing loads."""
    _launch(world, "cached-1", PENDING, AUTH_POD)
    queues, pods = _queue_reads(world), _pod_lists(fake_kube)

    result = _fresh(world, tmp_path, _STATUS_CHILD, *STATUS, *args)

    assert result["code"] == 0
    assert "cached-1" in str(result["stdout"])
    assert (_queue_reads(world) - queues, _pod_lists(fake_kube) - pods) == (0, 0)
    assert result["loaded"] == []


def test_status_of_pending_job_fresh_interpreter_loads_kubernetes_for_its_pod_read_only(
    tmp_path: Path, world: World, fake_kube: FakeKube
) -> None:
    """A PENDING job's diagnosis is Kubernetes work: the client loads with that one pod list,
    and no other client does."""
    _launch(world, "pending-1", PENDING, AUTH_POD)
    queues, pods = _queue_reads(world), _pod_lists(fake_kube)

    result = _fresh(world, tmp_path, _STATUS_CHILD, *STATUS, "pending-1")

    assert result["code"] == 0
    assert "status: PENDING" in str(result["stdout"])
    assert "blocker IMAGE_PULL_AUTH" in str(result["stdout"])
    assert (_queue_reads(world) - queues, _pod_lists(fake_kube) - pods) == (1, 1)
    assert _loaded(result) & CLIENTS == {"kubernetes"}


def test_status_of_decisionless_runtime_run_fresh_interpreter_loads_no_heavy_module(
    tmp_path: Path, world: World, fake_kube: FakeKube
) -> None:
    """prepare and grade succeed (no declared outputs), the gate fails: no decision was ever
    read, and status verifies the three jobs with one queue read and nothing else."""
    gate_fails = _timeline("PENDING", "FAILED", nth=3)
    world.faults(gate_fails, FINISHES)
    submitted = world.submit(RUNTIME, run_id="rt-nodecision")
    assert (submitted.exit_code, len(submitted.job_ids)) == (1, 3), submitted.to_json()
    queues, pods = _queue_reads(world), _pod_lists(fake_kube)

    result = _fresh(world, tmp_path, _STATUS_CHILD, *STATUS, "rt-nodecision")

    assert result["code"] == 1
    assert "status: FAILED" in str(result["stdout"])
    assert (_queue_reads(world) - queues, _pod_lists(fake_kube) - pods) == (1, 0)
    assert result["loaded"] == []


def test_status_of_decision_routed_runtime_run_fresh_interpreter_never_loads_boto3(
    tmp_path: Path, world: World, s3_server: MotoS3
) -> None:
    """The submit read the decision from S3; status finds it in the journal and reads no S3
    (the child has no S3 credentials or endpoint at all)."""
    s3_server.create_bucket("example-bucket")
    s3_server.put("example-bucket", _decision_key("rt-decided"), b'{"decision": "loop_back"}')
    submitted = submit_runtime(world, s3_server, "rt-decided")
    assert (submitted.exit_code, len(submitted.job_ids)) == (0, 4), submitted.to_json()

    result = _fresh(world, tmp_path, _STATUS_CHILD, *STATUS, "rt-decided")

    assert result["code"] == 0
    assert "status: SUCCEEDED" in str(result["stdout"])
    assert result["loaded"] == []


# a runtime submit in a fresh interpreter: the world (simulator, FakeKube, virtual clock) is
# built there too, so ``boto3`` in its ``sys.modules`` can only come from the submit
_RUNTIME_SUBMIT_CHILD = textwrap.dedent(
    """\
    import json, sys
    from pathlib import Path
    from tests.integration.runs.world import make_world
    from tests.support.fakekube import FakeKube
    report, heavy, root, spec, faults = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:]
    fake = FakeKube.start(Path(root) / "fakekube")
    try:
        world = make_world(Path(root) / "world", fake, pods=True)
        world.faults(*json.loads(faults))
        result = world.submit(spec, run_id="rt-submit")
    finally:
        fake.stop()
    with open(report, "w") as fh:
        loaded = [m for m in heavy if m in sys.modules]
        json.dump({"code": result.exit_code, "loaded": loaded, "jobs": len(result.job_ids)}, fh)
    """
)


def test_runtime_submit_reading_no_decision_fresh_interpreter_never_loads_boto3(
    tmp_path: Path,
) -> None:
    """S3 is read only for a decision or a declared output; waves that need neither (prepare
    and grade succeed, the gate fails before its decision exists) never load boto3."""
    faults = [_timeline("PENDING", "FAILED", nth=3), FINISHES]
    # a regression that did reach S3 would be refused at once, never wait on a real endpoint
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    root = tmp_path / "child"
    root.mkdir()

    result = _run_child(
        _RUNTIME_SUBMIT_CHILD, root, str(root), str(RUNTIME), json.dumps(faults), env=env
    )

    assert (result["code"], result["jobs"]) == (1, 3)
    assert "boto3" not in _loaded(result)
