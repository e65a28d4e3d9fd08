"""``npa cleanup`` against the SkyPilot simulator: reports, removes only local caches, keeps
what a live, in-flight or locked run needs, and never calls an unreadable queue empty."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from npa_infra.errors import ProjectError
from npa_infra.journal.lock import RunLock
from npa_infra.localstate import marker
from npa_infra.projects import selection, store
from npa_infra.projects.models import Selection
from npa_infra.projects.record import Project
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.skypilot.skycli import SkyCli
from npa_infra.workflow.operations import leftovers
from npa_infra.workflow.operations.cleanupreport import CacheEntry, CleanupReport
from npa_infra.workflow.target.services import Services
from preflight.probe_ledger import ProbeLedger
from tests.integration.runs.world import ROOT
from tests.integration.skypilot.simenv import KUBECONFIG
from tests.support import skyvenv
from tests.support.skysim import harness
from tests.support.stackjournal import journal_run

PENDING_FOREVER = {"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING"]}


class Box:
    """An npa home, a project root and the simulator; each state directory its own server."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "npa-home"
        self.home.mkdir()
        (tmp / "home").mkdir()
        (tmp / "kubeconfig").write_text(KUBECONFIG, encoding="utf-8")
        self.sky_bin = skyvenv.simulator(tmp)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "USER": "tester",
            "HOME": str(tmp / "home"),
            "KUBECONFIG": str(tmp / "kubeconfig"),
            "NPA_HOME": str(self.home),
            "SKYSIM_FAULTS": str(tmp / "faults.json"),
            "SKYSIM_API_PORT": "47347",
        }
        self.root = tmp / "project"
        (self.root / "stacks").mkdir(parents=True)
        shutil.copy(ROOT / "stacks" / "Pulumi.dev.yaml", self.root / "stacks")

    def faults(self, *rules: dict[str, object]) -> None:
        harness.write_faults(self.tmp / "faults.json", list(rules))

    def services(self) -> Services:
        def sky(isolated: IsolatedDir, env: Mapping[str, str], _bin: str | None) -> SkyCli:
            return SkyCli(self.sky_bin, isolated, env, check_ports=False)

        return Services(sky=sky)

    def state(self, name: str) -> IsolatedDir:
        iso = IsolatedDir(self.home / "skypilot-state" / name)
        iso.prepare(self.env, context="npa-ctx", controller=ControllerSettings())
        iso.user_id(self.env)
        return iso

    def launch(self, iso: IsolatedDir, name: str, user: str | None = None) -> None:
        task = self.tmp / "task.yaml"
        task.write_text("name: train\nrun: echo hi\n", encoding="utf-8")
        env = {**self.env, **({"SKYPILOT_USER_ID": user, "USER": user} if user else {})}
        assert SkyCli(self.sky_bin, iso, env, check_ports=False).launch(task, name=name).accepted

    def calls(self, iso: IsolatedDir) -> list[list[str]]:
        state = harness.read_state(iso.runtime / ".sky")
        return [list(c["argv"]) for c in state.get("calls", [])]

    def cleanup(self, *, yes: bool, **kw: object) -> CleanupReport:
        return leftovers.cleanup(
            env=self.env, yes=yes, project_root=self.root, services=self.services(), **kw
        )  # type: ignore[arg-type]


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def _npa_write(path: Path, size: int, kind: str) -> None:
    """A file in a directory npa made for its caches, as npa makes it (with its marker)."""
    marker.make_dir(path.parent, kind)
    _write(path, size)


def _marker(kind: str) -> int:
    """The bytes of npa's marker in a directory of ``kind``."""
    return len(json.dumps({"kind": kind, "schema": marker.SCHEMA}, sort_keys=True))


def _caches(box: Box) -> None:
    """One cache of every kind, with known sizes; the old state directory was never used."""
    _npa_write(box.home / "rendered" / "done-1" / "a.yaml", 10, "rendered_yaml")
    _npa_write(box.home / "rendered" / "done-1" / "b.yaml", 5, "rendered_yaml")
    _write(box.home / "cache" / "image-pull-probe.json", 7)
    _write(box.home / "cache" / "skypilot-gate.json", 3)
    _write(box.home / "skypilot-venv.versions" / "abc" / "pyvenv.cfg", 11)
    (box.home / "skypilot-venv").symlink_to(box.home / "skypilot-venv.versions" / "abc")
    old = box.home / "skypilot-state" / "old"
    marker.make_dir(old, "state_dir")
    _npa_write(old / "submissions" / "done-1" / "j.yaml", 4, "task_yaml")
    _npa_write(old / "supervision" / "queue.json", 6, "tick_files")


def _by_kind(report: CleanupReport) -> dict[str, CacheEntry]:
    return {c.kind: c for c in report.caches}


def _tree(*roots: Path) -> dict[str, str]:
    out = {}
    for root in roots:
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_cleanup_report_each_cache_kind_with_its_size_and_changes_nothing(tmp_path: Path) -> None:
    box = Box(tmp_path)
    _caches(box)
    before = _tree(box.home)
    report = box.cleanup(yes=False)
    kinds = _by_kind(report)
    ticks, task, state = _marker("tick_files"), _marker("task_yaml"), _marker("state_dir")
    assert {k: (c.bytes, c.removed, c.reason) for k, c in kinds.items()} == {
        "rendered_yaml": (15 + _marker("rendered_yaml"), False, None),
        "probe_cache": (7, False, None),
        "gate_cache": (3, False, None),
        "skypilot_venv": (11, False, None),
        "task_yaml": (4 + task, False, None),
        "tick_files": (6 + ticks, False, None),
        "state_dir": (10 + ticks + task + state, False, None),
    }
    assert kinds["state_dir"].path == str(box.home / "skypilot-state" / "old")
    assert report.managed_jobs[0].verdict == "never_used"  # no user-id: no controller named
    assert (report.status, report.exit_code) == ("report", 0)
    assert _tree(box.home) == before


def test_cleanup_yes_removes_only_local_caches(tmp_path: Path) -> None:
    box = Box(tmp_path)
    (tmp_path / "sim").mkdir()
    box.env["SKYSIM_STATE_DIR"] = str(tmp_path / "sim")  # the server's records outlive the dir
    _caches(box)
    gone = box.state("gone")  # its controller was torn down: the queue says not up
    journal_run(
        box.home, "done-1", status="SUCCEEDED", data={"isolated_config_dir": str(gone.root)}
    )
    _write(box.home / "credentials" / "dev.env", 0)
    (box.home / "credentials" / "dev.env").write_text("AWS_KEY=v\n", encoding="utf-8")
    (box.home / "config.yaml").write_text("skypilot: {}\n", encoding="utf-8")
    kept = [box.home / "credentials", box.home / "config.yaml", box.root / "stacks"]
    kept += [box.home / "journal.sqlite3"]
    before = _tree(*kept)
    report = box.cleanup(yes=True)
    assert report.status == "cleaned" and report.exit_code == 0
    assert all(c.removed for c in report.caches), report.caches
    for name in ("rendered", "skypilot-venv", "skypilot-venv.versions", "skypilot-state"):
        assert not (box.home / name).exists() or not any((box.home / name).iterdir())
    assert not (box.home / "cache" / "image-pull-probe.json").exists()
    assert _tree(*kept) == before  # stack files, credentials, config, journal untouched
    [managed] = [m for m in report.managed_jobs if m.state_dir == str(gone.root)]
    assert managed.verdict == "no_controller"
    assert not gone.root.exists()
    calls = harness.read_state(tmp_path / "sim").get("calls", [])
    assert [c["argv"][:2] for c in calls] == [["jobs", "queue"]]  # one read, nothing else


def test_cleanup_live_run_keeps_its_caches_and_is_named(tmp_path: Path) -> None:
    box = Box(tmp_path)
    box.faults(PENDING_FOREVER)
    iso = box.state("dev")
    box.launch(iso, "live-1-wave")
    journal_run(box.home, "live-1", status="SUBMITTED", data={"isolated_config_dir": str(iso.root)})
    journal_run(box.home, "done-1", status="SUCCEEDED", data={"isolated_config_dir": str(iso.root)})
    _write(box.home / "rendered" / "live-1" / "a.yaml", 3)
    _write(box.home / "rendered" / "done-1" / "a.yaml", 3)
    _write(iso.root / "submissions" / "live-1" / "w.yaml", 3)
    report = box.cleanup(yes=True)
    entries = {c.path: c for c in report.caches}
    live = entries[str(box.home / "rendered" / "live-1")]
    assert (live.removed, live.needed_by, live.reason) == (False, ["live-1"], "live_run")
    task = entries[str(iso.root / "submissions" / "live-1")]
    assert (task.removed, task.needed_by) == (False, ["live-1"])
    assert entries[str(iso.root)].needed_by == ["live-1"]
    assert entries[str(box.home / "rendered" / "done-1")].removed
    assert (iso.root / "submissions" / "live-1" / "w.yaml").is_file()
    assert report.runbook[0] == "npa workbench workflow cancel live-1 --json"
    [managed] = report.managed_jobs
    assert managed.verdict == "records"
    assert [(j.name, j.status) for j in managed.jobs] == [("live-1-wave", "PENDING")]
    # nothing but the queue read reached SkyPilot after the launch
    assert [c[:2] for c in box.calls(iso)][1:] == [["jobs", "queue"]]
    assert "--all-users" in box.calls(iso)[-1]


def test_cleanup_locked_run_keeps_its_cache_until_the_lock_is_free(tmp_path: Path) -> None:
    box = Box(tmp_path)
    state = tmp_path / "elsewhere"  # a state directory outside the home: only its caches go
    journal_run(box.home, "lk-1", status="SUCCEEDED", data={"isolated_config_dir": str(state)})
    _write(state / "submissions" / "lk-1" / "w.yaml", 3)
    lock = RunLock.in_state(state, "runs", "lk-1", stack="dev", argv=["npa"], now=1.0)
    lock.acquire()
    try:
        report = box.cleanup(yes=True)
    finally:
        lock.release()
    [entry] = [c for c in report.caches if c.kind == "task_yaml"]
    assert (entry.removed, entry.reason, entry.needed_by) == (False, "locked", ["lk-1"])
    assert (state / "submissions" / "lk-1" / "w.yaml").is_file()
    again = box.cleanup(yes=True)
    assert [c.removed for c in again.caches if c.kind == "task_yaml"] == [True]


def test_cleanup_inflight_launch_record_keeps_the_state_directory(tmp_path: Path) -> None:
    box = Box(tmp_path)
    iso = box.state("dev")  # no job: the queue proves the controller gone
    record = iso.root / "npa-locks" / "launches" / "fl-1.inflight.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"home": "/other", "job_name": "x"}), encoding="utf-8")
    report = box.cleanup(yes=True)
    [entry] = [c for c in report.caches if c.kind == "state_dir"]
    assert (entry.removed, entry.reason, entry.needed_by) == (False, "inflight_launch", ["fl-1"])
    assert record.is_file()


def test_cleanup_unavailable_queue_is_unknown_never_empty(tmp_path: Path) -> None:
    box = Box(tmp_path)
    iso = box.state("dev")
    box.faults({"command": "jobs.queue", "action": "fail", "kind": "transport"})
    _write(box.home / "skypilot-venv.versions" / "abc" / "pyvenv.cfg", 1)
    report = box.cleanup(yes=True)
    [managed] = report.managed_jobs
    assert (managed.verdict, managed.jobs) == ("unknown", [])
    kinds = _by_kind(report)
    assert (kinds["state_dir"].removed, kinds["state_dir"].reason) == (False, "controller_not_gone")
    assert kinds["skypilot_venv"].removed is False  # cleanup-controller still needs it
    assert iso.user_id_file.is_file()


def test_cleanup_lists_non_terminal_jobs_of_every_user(tmp_path: Path) -> None:
    box = Box(tmp_path)
    box.faults(PENDING_FOREVER)
    iso = box.state("dev")
    box.launch(iso, "mine")
    box.launch(iso, "theirs", user="other-operator")
    report = box.cleanup(yes=False)
    [managed] = report.managed_jobs
    assert sorted(j.name for j in managed.jobs) == ["mine", "theirs"]
    assert sorted(j.user for j in managed.jobs) == ["other-operator", "tester"]
    assert _by_kind(report)["state_dir"].reason == "controller_not_gone"


def test_cleanup_removal_failure_exits_1_and_names_the_path(tmp_path: Path) -> None:
    box = Box(tmp_path)
    _npa_write(box.home / "rendered" / "done-1" / "a.yaml", 1, "rendered_yaml")

    def refuse(path: Path) -> None:
        raise PermissionError(13, "Permission denied")

    report = box.cleanup(yes=True, remove=refuse)
    assert report.exit_code == 1
    assert str(box.home / "rendered" / "done-1") in report.errors[0]
    assert [c.removed for c in report.caches] == [False]


# -- a selection's part: npa cleanup -s NAME / -p ALIAS (issue 16) --------------------------


def _two_stacks(box: Box) -> dict[str, IsolatedDir]:
    """Stacks a and b, each with its state directory (controller gone), a done run with its
    caches, credentials and a project entry; b also has a live run. Shared caches too."""
    states = {}
    for name in ("a", "b"):
        (box.root / "stacks" / f"Pulumi.{name}.yaml").write_text(
            f"config:\n  npa-infra:context: ctx-{name}\n  npa-infra:namespace: ns-{name}\n",
            encoding="utf-8",
        )
        iso = states[name] = box.state(name)
        data = {"isolated_config_dir": str(iso.root), "context": f"ctx-{name}"}
        journal_run(box.home, f"{name}-done", stack=name, status="SUCCEEDED", data=data)
        _write(box.home / "rendered" / f"{name}-done" / "a.yaml", 2)
        _write(iso.root / "submissions" / f"{name}-done" / "j.yaml", 3)
        _npa_write(iso.root / "supervision" / "queue.json", 4, "tick_files")
        _write(box.home / "credentials" / f"{name}.env", 0)
        store.save(Project(alias=f"{name}lpha", stack=name), box.env)
        ProbeLedger(box.home, f"ctx-{name}").intend(f"ns-{name}", f"probe-{name}")
    data = {"isolated_config_dir": str(states["b"].root), "context": "ctx-b"}
    journal_run(box.home, "b-live", stack="b", status="SUBMITTED", data=data)
    _write(box.home / "rendered" / "b-live" / "a.yaml", 2)
    _write(box.home / "cache" / "image-pull-probe.json", 7)
    _write(box.home / "skypilot-venv.versions" / "abc" / "pyvenv.cfg", 11)
    return states


def _select(box: Box, **options: str) -> Selection:
    return selection.select(
        stack=options.get("stack"), project=options.get("project"), env=box.env, root=box.root
    )


@pytest.mark.parametrize(
    ("options", "selector"),
    [({"stack": "a"}, "-s a"), ({"project": "alpha"}, "-p alpha")],
    ids=["stack", "project-bound-to-stack"],
)
def test_cleanup_scoped_yes_removes_only_the_selection_caches_and_lists_only_it(
    tmp_path: Path, options: dict[str, str], selector: str
) -> None:
    box = Box(tmp_path)
    states = _two_stacks(box)
    a, b = states["a"].root, states["b"].root
    b_before = _tree(b, box.home / "rendered" / "b-done", box.home / "rendered" / "b-live")
    report = box.cleanup(yes=True, scope=_select(box, **options))
    entries = {c.path: c for c in report.caches}
    assert {p for p, c in entries.items() if c.removed} == {
        str(box.home / "rendered" / "a-done"),
        str(a / "submissions" / "a-done"),
        str(a / "supervision"),
        str(a),
    }
    shared = {str(box.home / "cache" / "image-pull-probe.json"), str(box.home / "skypilot-venv")}
    assert set(entries) - shared == {p for p, c in entries.items() if c.removed}
    probe, venv = (entries[p] for p in sorted(shared))
    assert (probe.reason, venv.reason, venv.needed_by) == ("shared", "live_run", ["b-live"])
    assert not a.exists() and (box.home / "skypilot-venv.versions").is_dir()
    assert _tree(b, box.home / "rendered" / "b-done", box.home / "rendered" / "b-live") == b_before
    assert [s.name for s in report.stacks] == ["a"]
    assert [p.alias for p in report.projects] == ["alpha"]
    assert [c.stack for c in report.credentials] == ["a"]
    assert [m.state_dir for m in report.managed_jobs] == [str(a)]
    pods = [(r.namespace, r.name) for r in report.cluster_resources if r.kind == "Pod"]
    assert pods == [("ns-a", "probe-a")]  # the probe pods recorded on a's context only
    assert {r.name for r in report.cluster_resources if r.kind == "Namespace"} <= {"ns-a"}
    assert report.runbook == [
        "npa skypilot cleanup-controller -s a --yes",
        "npa stack destroy -s a --yes",
        f"npa cleanup {selector} --yes",
    ]
    assert (report.status, report.exit_code, report.errors) == ("cleaned", 0, [])


def test_cleanup_scoped_report_of_other_stack_names_its_live_run(tmp_path: Path) -> None:
    box = Box(tmp_path)
    states = _two_stacks(box)
    report = box.cleanup(yes=False, scope=_select(box, stack="b"))
    assert report.runbook[:2] == [
        "npa workbench workflow cancel b-live -s b --json",
        "npa workbench workflow status b-live -s b --watch --json",
    ]
    entries = {c.path: c for c in report.caches}
    assert all("a-done" not in p and str(states["a"].root) not in p for p in entries)
    assert entries[str(states["b"].root)].needed_by == ["b-live"]
    assert states["a"].root.is_dir()  # a report changes nothing


def test_cleanup_unscoped_still_reports_every_stack(tmp_path: Path) -> None:
    box = Box(tmp_path)
    states = _two_stacks(box)
    report = box.cleanup(yes=False)
    paths = {c.path for c in report.caches}
    assert {str(states["a"].root), str(states["b"].root)} <= paths
    assert {"a", "b", "dev"} <= {s.name for s in report.stacks}
    assert {m.state_dir for m in report.managed_jobs} >= {str(s.root) for s in states.values()}
    assert report.runbook[-1] == "npa cleanup --yes"
    pods = {r.name for r in report.cluster_resources if r.kind == "Pod"}
    assert pods == {"probe-a", "probe-b"}


def test_cleanup_select_unknown_project_is_refused(tmp_path: Path) -> None:
    box = Box(tmp_path)
    _two_stacks(box)
    with pytest.raises(ProjectError) as refused:
        _select(box, project="ghost")
    assert refused.value.details["reason"] == "unknown_project"
    assert refused.value.exit_code == 1
