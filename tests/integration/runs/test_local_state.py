"""Faults in npa's local state (issue 24), tested where they happen.

- **concurrent operators**: 16 ``npa configure`` processes, released together, each storing
  one credential and half of them one field of the same project entry: every result
  survives (read-merge-write under a lock per file);
- **hostile input**: an emptied journal, another application's SQLite file at the journal
  path: every command refuses, names what it found, and nothing starts over; ``cleanup
  --yes`` removes nothing of a job the queue shows running;
- **cleanup removes only what npa can prove it made**: user files planted in every place
  ``cleanup --yes`` looks survive, symlinked roots are not looked into (and said so), and a
  live job of the state directory's own queue keeps its task YAML when the journal does not
  know its run.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.journal.store import journal_path
from npa_infra.localstate import marker
from npa_infra.projects import credentials, store
from npa_infra.projects.resolve import EntryState
from npa_infra.workflow.operations import leftovers
from npa_infra.workflow.operations.cleanupreport import CleanupReport
from npa_infra.workflow.target.services import Services
from tests.integration.runs.world import CONTEXT, ROOT, World
from tests.support.freeports import nothing_listens
from tests.support.stackjournal import journal_run

MINIMAL = ROOT / "workflows/testing/minimal.yaml"
RUNNING_FOREVER = {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]}
WRITERS = 16

# Each writer imports the CLI first, says it is ready, then waits at the gate (a FIFO) until
# the test opens it for every writer at once: the 16 read-merge-writes overlap for real.
_GATED = """
import os, runpy, sys
import npa_infra.cli.main, npa_infra.workflow.operations.configure
os.write(int(sys.argv[2]), b"r")
os.close(os.open(sys.argv[1], os.O_RDONLY))
sys.argv = ["npa", *sys.argv[3:]]
runpy.run_module("npa_infra", run_name="__main__")
"""


def _digest(path: Path) -> str:
    body = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    return hashlib.sha256(body).hexdigest()


def _tree(*roots: Path) -> dict[str, str]:
    """Each root file, and every file (and symlink) under each root directory, not following
    links, with its content hash; a root that is gone is listed as gone."""
    out = {}
    for root in roots:
        if not os.path.lexists(root):
            out[str(root)] = "gone"
        elif root.is_symlink() or root.is_file():
            out[str(root)] = _digest(root)
        for directory, dirs, files in os.walk(root, followlinks=False):
            for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(directory, d)))]:
                out[os.path.join(directory, name)] = _digest(Path(directory, name))
    return out


def _write(path: Path, text: str = "user data") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _npa_write(path: Path, kind: str) -> None:
    marker.make_dir(path.parent, kind)
    path.write_text("name: npa\n", encoding="utf-8")


# -- concurrent operators: 16 configure writers ------------------------------------------------


def test_configure_16_concurrent_writers_every_credential_and_field_survives(
    tmp_path: Path,
) -> None:
    home, cwd = tmp_path / "npa-home", tmp_path / "cwd"
    cwd.mkdir()
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = {**os.environ, "NPA_HOME": str(home), "PATH": str(tmp_path / "no-bin")}
    ready_r, ready_w = os.pipe()
    writers = []
    for i in range(WRITERS):
        value = _write(tmp_path / f"value-{i}", f"value-{i}-{'x' * i}")
        field = ["--namespace", "ns-team"] if i % 2 else ["--release-namespace", "reg.test/team"]
        argv = ["configure", "-p", "team", "--context", "ctx-team", "--store", "file",
                "--credential", f"NAME_{i:02d}=@{value}", *field, "--no-input", "--json"]  # fmt: skip
        writers.append(
            subprocess.Popen(
                [sys.executable, "-c", _GATED, str(gate), str(ready_w), *argv],
                cwd=cwd,
                env=env,
                pass_fds=(ready_w,),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    os.close(ready_w)
    ready = b""
    while len(ready) < WRITERS:  # every writer imported and waits at the gate
        chunk = os.read(ready_r, WRITERS)
        assert chunk, "a writer died before the gate"
        ready += chunk
    os.close(ready_r)
    opened = os.open(gate, os.O_WRONLY)  # releases them all at once
    try:
        results = [(w.wait(timeout=300), *w.communicate()) for w in writers]
    finally:
        os.close(opened)
    assert [code for code, _, _ in results] == [0] * WRITERS, [err for _, _, err in results]
    assert {json.loads(out)["status"] for _, out, _ in results} <= {"created", "updated"}

    stored = credentials.read_pairs(home / "credentials" / "projects" / "team.env")
    assert stored == {f"NAME_{i:02d}": f"value-{i}-{'x' * i}" for i in range(WRITERS)}
    entry = store.load("team", {"NPA_HOME": str(home)})
    assert entry.state is EntryState.PRESENT and entry.project is not None
    assert (entry.project.context, entry.project.namespace, entry.project.release_namespace) == (
        "ctx-team",
        "ns-team",
        "reg.test/team",
    )
    for path in (home, home / "projects", home / "credentials" / "projects"):
        assert path.stat().st_mode & 0o777 == 0o700, path
    leftovers_of_writes = [p.name for p in home.rglob("*.tmp")]
    assert leftovers_of_writes == []


# -- hostile input: the journal -------------------------------------------------------------------


def _cli(world: World, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, list(args), obj=world.services(), env=env or world.env, catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def test_emptied_journal_every_command_refuses_and_nothing_of_the_running_job_goes(
    world: World,
) -> None:
    world.faults(RUNNING_FOREVER)
    result = world.submit(MINIMAL, run_id="ej-1")
    task_yaml = world.isolated.root / "submissions" / "ej-1"
    assert task_yaml.is_dir() and result.job_id is not None
    path = journal_path(world.home)
    path.write_bytes(b"")  # `: > journal.sqlite3`
    calls = len(world.sim_calls())
    before = _tree(task_yaml)
    cleanup_env = {**world.env, "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": str(world.isolated.root)}
    commands = [
        ("workbench", "workflow", "list"),
        ("workbench", "workflow", "status", "ej-1"),
        ("workbench", "workflow", "cancel", "ej-1"),
        ("workbench", "workflow", "submit", str(MINIMAL), "--resume-run", "ej-1",
         "--infra", f"k8s/{CONTEXT}", "--no-preflight-images"),
        ("cleanup", "--yes"),
    ]  # fmt: skip
    for command in commands:
        code, stdout, stderr = _cli(world, *command, env=cleanup_env)
        assert code == 1, (command, stdout, stderr)
        assert f"the journal {path} is empty (0 bytes)" in stderr, (command, stderr)
        assert f"mv -n {path} " in stderr, (command, stderr)
    assert path.stat().st_size == 0  # never replaced by an empty journal
    assert _tree(task_yaml) == before  # the running job's task YAML is still there
    assert world.sim_calls()[calls:] == []  # nothing reached SkyPilot: no cancel, no launch
    [job] = world.jobs_named(world.sim_jobs()[0]["name"])
    assert job.get("status") not in ("CANCELLED", "CANCELLING")


def test_foreign_sqlite_at_journal_path_refused_and_left_as_it_was(world: World) -> None:
    path = journal_path(world.home)
    world.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("CREATE TABLE meta (k TEXT, v TEXT)")
    conn.execute("INSERT INTO meta VALUES ('owner', 'another application')")
    conn.close()
    before = path.read_bytes()
    code, stdout, _ = _cli(world, "workbench", "workflow", "list", "--json")
    assert code == 1
    error = json.loads(stdout)["error"]
    assert error["details"] == {"journal": str(path), "found": "foreign"}
    assert "another application" in error["message"] and "mv -n" in error["remedy"]
    assert path.read_bytes() == before  # not migrated, not switched to WAL (header byte 18)
    assert before[18] == 1 and not Path(f"{path}-wal").exists()


# -- cleanup: only what npa can prove it made ---------------------------------------------------


def _cleanup(env: dict[str, str], **kw: object) -> CleanupReport:
    services = Services(api_ports=nothing_listens)
    return leftovers.cleanup(env=env, yes=True, services=services, **kw)  # type: ignore[arg-type]


def test_cleanup_yes_user_files_planted_everywhere_it_looks_survive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "npa-home"
    env = {"NPA_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    # npa's own caches, as npa makes them: these go (the positive control)
    _npa_write(home / "rendered" / "npa-run" / "job.yaml", "rendered_yaml")
    marker.make_dir(home / "skypilot-state" / "npa-state", "state_dir")
    journal_run(home, "legacy-run", status="SUCCEEDED")  # rendered by an npa before markers
    _write(home / "rendered" / "legacy-run" / "job.yaml", "name: npa\n")
    # a project whose state directory npa created, later shared with the user's own files
    code = CliRunner().invoke(
        app,
        ["configure", "-p", "lab", "--context", "c", "--state-dir", str(tmp_path / "lab"),
         "--no-input"],
        env=env,
        catch_exceptions=False,
    ).exit_code  # fmt: skip
    assert code == 0
    lab = tmp_path / "lab"
    _npa_write(lab / "submissions" / "npa-run" / "job.yaml", "task_yaml")
    # an entry an npa before issue 24 wrote, with a relative state directory
    (home / "projects" / "old.yaml").write_text("alias: old\ncontext: c\nstate_dir: rel\n")
    cwd = tmp_path / "cwd"
    user = [
        _write(home / "rendered" / "mine" / "notes.txt"),
        _write(home / "rendered" / "legacy-run" / "notes.txt"),
        _write(home / "rendered" / "loose.txt"),
        _write(home / "skypilot-state" / "userdir" / "notes.txt"),
        _write(home / "skypilot-state" / "userdir" / "submissions" / "x" / "job.yaml"),
        _write(home / "cache" / "notes.txt"),
        _write(lab / "notes.txt"),
        _write(lab / "submissions" / "theirs" / "data.bin"),
        _write(lab / "supervision" / "own.txt"),
        _write(cwd / "rel" / "submissions" / "x" / "job.yaml"),
        _write(cwd / "rel" / "supervision" / "t.json"),
    ]
    before = _tree(*user)
    monkeypatch.chdir(cwd)

    report = _cleanup(env)

    assert _tree(*user) == before  # every user file survived
    assert not (home / "rendered" / "npa-run").exists()
    assert not (home / "skypilot-state" / "npa-state").exists()
    assert not (lab / "submissions" / "npa-run").exists()
    assert not (home / "rendered" / "legacy-run" / "job.yaml").exists()  # npa's own file
    kept = {c.path: c.reason for c in report.caches if not c.removed}
    for path in (home / "rendered" / "mine", home / "skypilot-state" / "userdir",
                 lab / "submissions" / "theirs", lab / "supervision"):  # fmt: skip
        assert kept[str(path)] == "not_npa_made", path
    assert any("legacy-run" in e and "notes.txt" in e for e in report.errors), report.errors
    assert {p.alias: bool(p.problem) for p in report.projects} == {"lab": False, "old": True}
    assert not [c for c in report.caches if "/rel/" in c.path or c.path.startswith("rel")]


def test_cleanup_yes_symlinked_roots_not_descended_and_reported(tmp_path: Path) -> None:
    home = tmp_path / "npa-home"
    env = {"NPA_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    outside = tmp_path / "outside"
    # behind each link: even directories that look like npa's own caches
    _npa_write(outside / "rendered" / "run-x" / "job.yaml", "rendered_yaml")
    marker.make_dir(outside / "states" / "s1", "state_dir")
    _npa_write(outside / "states" / "s1" / "submissions" / "r" / "job.yaml", "task_yaml")
    _write(outside / "cache" / "image-pull-probe.json", "{}")
    _npa_write(outside / "ticks" / "q.json", "tick_files")
    home.mkdir()
    for name, target in (("rendered", "rendered"), ("skypilot-state", "states"),
                         ("cache", "cache")):  # fmt: skip
        (home / name).symlink_to(outside / target)
    state = tmp_path / "state"  # a state directory whose supervision/ is a link
    marker.make_dir(state, "state_dir")
    (state / "supervision").symlink_to(outside / "ticks")
    env["NPA_SKYPILOT_ISOLATED_CONFIG_DIR"] = str(state)
    journal_run(home, "s1-run", status="SUCCEEDED",
                data={"isolated_config_dir": str(home / "skypilot-state" / "s1")})  # fmt: skip
    before = _tree(outside)

    report = _cleanup(env)

    assert _tree(outside) == before
    assert report.caches == []  # nothing behind a link was even listed
    skipped = {(s.path, s.reason) for s in report.skipped}
    assert skipped >= {(str(home / "rendered"), "symlink"), (str(home / "skypilot-state"), "symlink"),
                       (str(home / "cache"), "symlink"), (str(state / "supervision"), "symlink")}  # fmt: skip
    code = CliRunner().invoke(app, ["cleanup"], env=env, catch_exceptions=False)
    assert f"not looked into: {home / 'rendered'} (symlink)" in code.stdout


def test_cleanup_yes_keeps_task_yaml_of_a_job_its_queue_shows_running_without_journal(
    world: World,
) -> None:
    world.faults(RUNNING_FOREVER)
    world.submit(MINIMAL, run_id="lj-1")
    task_yaml = world.isolated.root / "submissions" / "lj-1"
    before = _tree(task_yaml)
    for name in ("journal.sqlite3", "journal.sqlite3-wal", "journal.sqlite3-shm"):
        if (world.home / name).exists():  # moved aside properly, as the refusal says
            (world.home / name).rename(world.root / f"aside-{name}")
    env = {**world.env, "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": str(world.isolated.root)}

    report = leftovers.cleanup(env=env, yes=True, services=world.services())

    [entry] = [c for c in report.caches if c.path == str(task_yaml)]
    assert (entry.removed, entry.reason) == (False, "live_job")
    assert world.sim_jobs()[0]["name"] in entry.detail
    assert _tree(task_yaml) == before
    [managed] = report.managed_jobs
    assert [j.status for j in managed.jobs] == ["RUNNING"]


def test_cleanup_project_entry_relative_state_dir_never_resolved_against_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "npa-home"
    env = {"NPA_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    (home / "projects").mkdir(parents=True)
    (home / "projects" / "old.yaml").write_text(
        yaml.safe_dump({"alias": "old", "context": "c", "state_dir": "rel"}), encoding="utf-8"
    )
    cwd = tmp_path / "cwd"
    # marked as npa's: cleanup would remove it if it resolved "rel" against its directory
    _npa_write(cwd / "rel" / "submissions" / "r" / "job.yaml", "task_yaml")
    monkeypatch.chdir(cwd)
    before = _tree(cwd)
    report = _cleanup(env)
    assert _tree(cwd) == before
    [entry] = report.projects
    assert "relative" in entry.problem


def test_journal_moved_aside_without_its_log_readers_refuse_not_no_runs(world: World) -> None:
    world.faults(RUNNING_FOREVER)
    world.submit(MINIMAL, run_id="wl-1")
    path = journal_path(world.home)
    with sqlite3.connect(str(path)) as held:  # a reader keeps the log from being checkpointed
        held.execute("SELECT 1 FROM runs").fetchall()
        path.rename(world.root / "aside.sqlite3")  # the main file alone (issue 24 item 10)
        wal = Path(f"{path}-wal")
        if not wal.exists():
            wal.write_bytes(b"\0" * 32)
        for command in (("workbench", "workflow", "list"), ("cleanup",)):
            code, stdout, stderr = _cli(world, *command)
            assert code == 1, (command, stdout)
            assert "is missing but its -wal file is there" in stderr, (command, stderr)
    assert not path.exists()  # no new journal was started beside the old log
