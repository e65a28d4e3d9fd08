"""Two PENDING runs supervised at once: one queue read and one pod list per tick, not per run.

Two runs are launched against the sky simulator with pods in the Kubernetes
double that can never pull their image (401). Their supervisors (threads on
one ``Lockstep`` clock, as processes polling at one interval) share each
tick's queue read and pod and node lists through the controller's state
directory; each still classifies its own job's pod (IMAGE_PULL_AUTH,
permanent) from the shared list, by its exact job id.
"""

from __future__ import annotations

from pathlib import Path

from npa_infra.kube.client import KubeApi
from npa_infra.kube.sharedpods import SharedPods
from npa_infra.runs import supervision
from npa_infra.skypilot.sharedqueue import SharedQueue
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.workflow.supervision import watch
from npa_infra.workflow.supervision.watch import WatchResult
from tests.integration.runs.test_status_all import AUTH_POD, PENDING_FOREVER
from tests.integration.runs.world import CONTEXT, ROOT, World, make_world
from tests.support.fakekube import FakeKube
from tests.support.lockstep import Lockstep, RecordingJournal, supervise_together

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
INTERVAL = 10.0


def _queue_reads(world: World) -> int:
    return sum(1 for c in world.sim_calls() if c[:2] == ["jobs", "queue"] and "-v" in c)


def _pod_lists(fake: FakeKube) -> int:
    return len(fake.calls("GET", r"/pods(\?|$)"))


def _supervise(
    world: World, job_ids: dict[str, int], *, shared: bool
) -> tuple[dict[str, WatchResult], Lockstep]:
    lockstep = Lockstep(parties=len(job_ids), interval=INTERVAL)
    journal = RecordingJournal()
    sky = SkyCli(world.sky_bin, world.isolated, world.env, check_ports=False)
    directory = world.isolated.root / "supervision"

    def supervise(run: str) -> WatchResult:
        cluster = KubeApi(Path(world.env["KUBECONFIG"]), CONTEXT)
        queue = SharedQueue(sky, directory, lockstep.now)
        pods = SharedPods(cluster, directory, lockstep.now)
        return watch.watch_job(
            run_id=run,
            wave_index=0,
            attempt=1,
            job_id=job_ids[run],
            sky=sky,
            cluster=cluster,
            journal=journal,  # type: ignore[arg-type]
            clock=lockstep.clock(),
            policy=supervision.WatchPolicy(permanent_grace=20.0),
            interval=INTERVAL,
            read_queue=(
                (lambda since: queue.read(max_age=INTERVAL, not_before=since)) if shared else None
            ),
            read_pods=(
                (lambda since: pods.read(max_age=INTERVAL, not_before=since)) if shared else None
            ),
        )

    return supervise_together(lockstep, job_ids, supervise), lockstep


def _two_pending_runs(tmp_path: Path, fake_kube: FakeKube) -> tuple[World, dict[str, int]]:
    world = make_world(tmp_path / "pods", fake_kube, pods=True)
    world.faults(PENDING_FOREVER, AUTH_POD)
    ids = {}
    for run in ("shared-1", "shared-2"):
        result = world.submit(MINIMAL, run_id=run)
        assert result.exit_code == 0 and result.job_id is not None
        ids[run] = result.job_id
    return world, ids


def test_two_pending_runs_share_one_queue_read_and_one_pod_list_per_tick(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world, ids = _two_pending_runs(tmp_path, fake_kube)
    queues, pods = _queue_reads(world), _pod_lists(fake_kube)

    results, lockstep = _supervise(world, ids, shared=True)

    ticks = lockstep.ticks + 1  # the deciding tick ends both watches without a sleep
    assert {r: (w.verdict, (w.blocker or {}).get("code")) for r, w in results.items()} == {
        run: (supervision.Verdict.PERMANENT_BLOCKER, "IMAGE_PULL_AUTH") for run in ids
    }
    for run, result in results.items():
        assert (result.blocker or {}).get("job_id") == ids[run]  # its own pod, by exact id
    assert _queue_reads(world) - queues == ticks
    assert _pod_lists(fake_kube) - pods == ticks


def test_unshared_control_lists_pods_once_per_run_per_tick(
    tmp_path: Path, fake_kube: FakeKube
) -> None:
    world, ids = _two_pending_runs(tmp_path, fake_kube)
    queues, pods = _queue_reads(world), _pod_lists(fake_kube)

    results, lockstep = _supervise(world, ids, shared=False)

    ticks = lockstep.ticks + 1
    assert all(r.verdict is supervision.Verdict.PERMANENT_BLOCKER for r in results.values())
    assert _queue_reads(world) - queues == 2 * ticks
    assert _pod_lists(fake_kube) - pods == 2 * ticks
