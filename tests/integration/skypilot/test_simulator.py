"""The ``sky`` simulator itself follows skypilot-0.12.md §12: exact texts, exit codes, state.

These tests run the simulator's wrapper directly, byte for byte, so the contract
suite can trust what the adapter sees.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from npa_infra.skypilot import classify
from npa_infra.skypilot.models import CommandResult, ErrorKind
from tests.support import skyvenv
from tests.support.skysim import harness
from tests.support.skysim.main import DEFAULT_VERSION, VERSION_FILE

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "skypilot" / "real"

PORT = "47346"
NOT_UP = "sky.exceptions.ClusterNotUpError: No in-progress managed jobs.\n"
SELECTOR = "Can only specify one of JOB_IDS, --name, --pool, or --all/--all-users. Provided {}."
# §3.2, typed from the contract independently of the simulator's own list.
CONTRACT_KEYS = [
    "task_job_id",
    "job_id",
    "task_id",
    "job_name",
    "task_name",
    "job_duration",
    "workspace",
    "status",
    "schedule_state",
    "resources",
    "cluster_resources",
    "cluster_resources_full",
    "cloud",
    "region",
    "zone",
    "infra",
    "recovery_count",
    "details",
    "failure_reason",
    "user_name",
    "user_hash",
    "submitted_at",
    "start_at",
    "end_at",
    "user_yaml",
    "entrypoint",
    "metadata",
    "controller_pid",
    "controller_pid_started_at",
    "dag_yaml_path",
    "env_file_path",
    "last_recovered_at",
    "run_timestamp",
    "priority",
    "priority_class",
    "original_user_yaml_path",
    "pool",
    "pool_hash",
    "current_cluster_name",
    "cluster_name_on_cloud",
    "job_id_on_pool_cluster",
    "accelerators",
    "labels",
    "links",
    "node_names",
    "execution",
    "is_job_group",
    "is_primary_in_job_group",
    "is_batch",
    "batch_total_batches",
    "batch_completed_batches",
    "internal_external_ips",
    "internal_services",
]
DEFAULT_KEYS = set(
    [
        "job_id",
        "task_id",
        "workspace",
        "job_name",
        "task_name",
        "resources",
        "submitted_at",
        "end_at",
        "job_duration",
        "recovery_count",
        "status",
        "pool",
    ]
)
VERBOSE_KEYS = set(
    [
        "start_at",
        "failure_reason",
        "details",
        "schedule_state",
        "infra",
        "cloud",
        "region",
        "zone",
        "cluster_resources",
        "current_cluster_name",
        "metadata",
    ]
)


@dataclass
class Sky:
    root: Path
    binary: Path
    env: dict[str, str] = field(default_factory=dict)

    def __call__(
        self, *args: str, stdin: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args],
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            cwd=self.root,
            timeout=30,
            check=False,
        )

    def faults(self, *rules: dict[str, Any]) -> None:
        harness.write_faults(self.root / "faults.json", list(rules))

    def task(self, text: str = "name: t\nrun: echo hi\n") -> str:
        path = self.root / "task.yaml"
        path.write_text(text, encoding="utf-8")
        return str(path)

    def launch(self, name: str, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
        done = self("jobs", "launch", "-n", name, "-y", "--async", *extra, self.task(), **env)
        assert done.returncode == 0, done.stderr
        return done

    def queue(self, *flags: str, **env: str) -> list[dict[str, Any]]:
        done = self("jobs", "queue", "-a", *flags, "-o", "json", **env)
        assert done.returncode == 0, done.stderr
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        return rows

    def state(self) -> dict[str, Any]:
        return harness.read_state(self.root / "runtime" / ".sky")


@pytest.fixture
def sky(tmp_path: Path) -> Sky:
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "USER": "tester",
        "HOME": str(tmp_path / "home"),
        "SKY_RUNTIME_DIR": str(tmp_path / "runtime"),
        "SKYPILOT_USER_ID": "alice",
        "SKYSIM_FAULTS": str(tmp_path / "faults.json"),
        "SKYSIM_API_PORT": PORT,
        "SKYSIM_BANNER": "0",
    }
    return Sky(tmp_path, skyvenv.simulator(tmp_path), env)


# -- version, banner, empty queue ------------------------------------------------------
def test_sim_version_recorded_line_verbatim(sky: Sky) -> None:
    done = sky("--version")
    expected = Path(VERSION_FILE).read_text() if Path(VERSION_FILE).exists() else DEFAULT_VERSION
    assert (done.returncode, done.stdout) == (0, expected)


@pytest.mark.parametrize(
    ("golden", "args", "env"),
    [
        ("queue_no_controller", ("jobs", "queue", "--all", "--output", "json"), {}),
        ("queue_verbose_no_controller", ("jobs", "queue", "--all", "-v", "-o", "json"), {}),
        (
            "queue_no_controller_server_start",
            ("jobs", "queue", "--all", "--output", "json"),
            {"SKYSIM_BANNER": "1"},
        ),
        ("queue_table_no_controller", ("jobs", "queue"), {}),
        ("cancel_no_controller", ("jobs", "cancel", "--yes", "1"), {}),
        (
            "down_controller_absent",
            ("down", "sky-jobs-controller-npa-realtest01", "--yes"),
            {"SKYPILOT_USER_ID": "npa-realtest01"},
        ),
    ],
    ids=["queue", "queue-verbose", "queue-server-start", "queue-table", "cancel", "down"],
)
def test_sim_no_controller_answer_matches_real_golden(
    sky: Sky, golden: str, args: tuple[str, ...], env: dict[str, str]
) -> None:
    code, stdout, stderr = harness.read_recorded(REAL / f"{golden}.txt")
    done = sky(*args, **env)
    # the simulator never names port 46580: its own port stands in for it
    assert (done.returncode, done.stdout, done.stderr) == (
        code,
        stdout.replace(":46580", f":{PORT}"),
        stderr,
    )


def test_sim_server_banner_only_on_first_call(sky: Sky) -> None:
    calls = [sky("jobs", "queue", "-a", "-o", "json", SKYSIM_BANNER="1") for _ in range(2)]
    assert "Starting a local server." in calls[0].stdout
    assert calls[1].stdout == ""
    assert [c.stderr for c in calls] == [NOT_UP] * 2


# -- launch ---------------------------------------------------------------------------
@pytest.mark.parametrize("answer", [None, "n\n"], ids=["eof", "no"])
def test_sim_launch_prompt_declined_aborted_no_job(sky: Sky, answer: str | None) -> None:
    done = sky("jobs", "launch", "-n", "j", "-d", sky.task(), stdin=answer)
    assert (done.returncode, done.stderr) == (1, "Aborted!\n")
    assert done.stdout.startswith(f"YAML to run: {sky.task()}\n")
    assert done.stdout.endswith("Launching a managed job 'j'. Proceed? [Y/n]: ")
    assert sky.state()["jobs"] == []


def test_sim_launch_async_prints_exact_block(sky: Sky) -> None:
    lines = sky.launch("j").stdout.splitlines()
    match = re.fullmatch(r"Submitted sky\.jobs\.launch request: ([0-9a-f-]{36})", lines[1])
    assert match is not None
    short = match.group(1)[:8]
    assert lines == [
        f"YAML to run: {sky.task()}",
        f"Submitted sky.jobs.launch request: {match.group(1)}",
        f"├── Check logs with: sky api logs {short}",
        f"├── Or, visit: http://127.0.0.1:{PORT}/api/stream?request_id={short}",
        f"└── To cancel the request, run: sky api cancel {short}",
    ]


def test_sim_launch_sync_controller_id_differs_from_managed_id(sky: Sky) -> None:
    done = sky("jobs", "launch", "-n", "j", "-d", sky.task(), stdin="y\n")
    assert done.returncode == 0
    submitted = re.search(r"^⚙︎ Job submitted, ID: (\d+)$", done.stdout, re.MULTILINE)
    managed = re.search(r"^Managed Job ID: (\d+)\s*$", done.stdout, re.MULTILINE)
    assert submitted and managed
    assert submitted.group(1) != managed.group(1)
    assert [r["job_id"] for r in sky.queue()] == [int(managed.group(1))]
    assert "📋 Useful Commands" in done.stdout


@pytest.mark.parametrize(
    ("final", "code"),
    [("SUCCEEDED", 0), ("FAILED", 100), ("FAILED_PRECHECKS", 100), ("CANCELLED", 103),
     ("RUNNING", 101)],
    ids=["succeeded", "failed", "failed-prechecks", "cancelled", "not-finished"],
)  # fmt: skip
def test_sim_launch_sync_without_detach_exits_with_result(sky: Sky, final: str, code: int) -> None:
    sky.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["PENDING", final]})
    done = sky("jobs", "launch", "-n", "j", "-y", sky.task())
    assert done.returncode == code
    assert sky.queue()[0]["status"] == final


def test_sim_launch_bare_secret_unset_usage_error(sky: Sky) -> None:
    done = sky("jobs", "launch", "-n", "j", "-y", "--async", "--secret", "NOPE", sky.task())
    assert done.returncode == 2
    assert done.stderr.startswith("Usage: sky jobs launch")
    assert "Error: Invalid value for '--secret': NOPE is not set" in done.stderr


# -- queue ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flags", "filled"),
    [
        ((), DEFAULT_KEYS),
        (("-v",), DEFAULT_KEYS | VERBOSE_KEYS),
        (("-u",), DEFAULT_KEYS | {"user_name"}),
        (("-u", "-v"), DEFAULT_KEYS | VERBOSE_KEYS | {"user_name", "user_hash"}),
    ],
    ids=["default", "verbose", "all-users", "all-users-verbose"],
)
def test_sim_queue_json_every_key_requested_ones_filled(
    sky: Sky, flags: tuple[str, ...], filled: set[str]
) -> None:
    sky.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["FAILED_PRECHECKS"]})
    sky.launch("j", "--infra", "k8s/npa-ctx")
    (row,) = sky.queue(*flags)
    assert list(row) == CONTRACT_KEYS
    assert {k for k, v in row.items() if v is not None} <= filled
    assert {"job_id", "status", "job_name", "submitted_at", "end_at"} <= set(row) & filled
    assert isinstance(row["submitted_at"], float) and isinstance(row["status"], str)
    if "-v" in flags:
        assert row["infra"] == "Kubernetes/npa-ctx"
        assert "satisfying the request" in row["failure_reason"]
    if "-u" in flags:
        assert row["user_name"] == "tester"


def test_sim_queue_filters_by_user_unless_all_users(sky: Sky) -> None:
    sky.launch("mine")
    sky.launch("theirs", SKYPILOT_USER_ID="bob")
    assert [r["job_name"] for r in sky.queue()] == ["mine"]
    assert [r["job_name"] for r in sky.queue(SKYPILOT_USER_ID="bob")] == ["theirs"]
    assert {r["job_name"] for r in sky.queue("-u")} == {"mine", "theirs"}


def test_sim_queue_table_mode_lists_jobs(sky: Sky) -> None:
    sky.launch("j")
    done = sky("jobs", "queue")
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        "Fetching managed job statuses...",
        "Managed jobs",
        "In progress tasks: 1 PENDING",
    ]
    assert lines[3].split()[:3] == ["ID", "TASK", "NAME"]
    assert lines[4].split()[:3] == ["1", "-", "j"]


@pytest.mark.parametrize(
    ("clock", "interval", "expected"),
    [("seconds", 1e-9, "SUCCEEDED"), ("seconds", 1e9, "PENDING"), ("calls", 1.0, "PENDING")],
    ids=["wall-clock-elapsed", "wall-clock-not-yet", "per-call"],
)
def test_sim_timeline_clock_modes(sky: Sky, clock: str, interval: float, expected: str) -> None:
    sky.faults(
        {
            "command": "jobs.launch",
            "action": "timeline",
            "statuses": ["PENDING", "RUNNING", "SUCCEEDED"],
            "clock": clock,
            "interval": interval,
        }
    )
    sky.launch("j")
    assert sky.queue()[0]["status"] == expected


# -- cancel ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "provided"),
    [
        ((), "''"),
        (("1", "-a"), "'--job-ids 1 --all'"),
        (("1", "2", "-n", "x"), "'--job-ids 1,2 --name x'"),
        (("-p", "p", "-u"), "'--pool p --all-users'"),
    ],
    ids=["none", "ids-and-all", "ids-and-name", "pool-and-all-users"],
)
def test_sim_cancel_selector_rule_usage_exit_2(
    sky: Sky, args: tuple[str, ...], provided: str
) -> None:
    done = sky("jobs", "cancel", "-y", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("Usage: sky jobs cancel")
    assert done.stderr.endswith(f"Error: {SELECTOR.format(provided)}\n")


def test_sim_cancel_every_success_line(sky: Sky) -> None:
    sky.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]})
    for name in ("a", "b", "c", "dup", "dup", "e"):
        sky.launch(name)

    def cancel(*args: str) -> str:
        done = sky("jobs", "cancel", "-y", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert cancel("1") == "Job with ID 1 is scheduled to be cancelled.\n"
    assert cancel("2", "3") == "Jobs with IDs 2, 3 are scheduled to be cancelled.\n"
    assert cancel("-n", "e") == "'e' Job with ID 6 is scheduled to be cancelled.\n"
    assert cancel("-n", "zzz") == "No running job found with name 'zzz'.\n"
    assert cancel("99") == "No job to cancel.\n"
    # §4.2 (observed on 0.12.2): two live jobs of one name print their ids, exit 0 and
    # cancel nothing
    duplicate = sky("jobs", "cancel", "-y", "-n", "dup")
    assert (duplicate.returncode, duplicate.stderr) == (0, "")
    assert duplicate.stdout == (
        "\x1b[31mMultiple running jobs found with name 'dup'.\nJob IDs: [5, 4]\x1b[0m\n"
    )
    # CANCELLING is not terminal (§4.1): -a names those jobs again
    assert cancel("-a") == "Jobs with IDs 1, 2, 3, 4, 5, 6 are scheduled to be cancelled.\n"
    statuses = [r["status"] for r in sky.queue()]
    assert statuses == ["CANCELLING"] * 6
    assert [r["status"] for r in sky.queue()] == ["CANCELLED"] * 6
    assert cancel("1") == "No job to cancel.\n"


def _result(done: subprocess.CompletedProcess[str]) -> CommandResult:
    return CommandResult(tuple(done.args), done.returncode, done.stdout, done.stderr)


def test_sim_cancel_by_duplicate_name_exits_0_and_cancels_nothing(sky: Sky) -> None:
    sky.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]})
    for name in ("dup", "dup", "other"):
        sky.launch(name)

    done = sky("jobs", "cancel", "-y", "-n", "dup")

    assert (done.returncode, done.stderr) == (0, "")
    assert "Job IDs: [2, 1]" in done.stdout
    assert classify.parse_cancel(_result(done)).error_kind is ErrorKind.UNKNOWN  # never success
    assert [r["status"] for r in sky.queue()] == ["RUNNING"] * 3
    assert [r["status"] for r in sky.queue()] == ["RUNNING"] * 3


def test_sim_cancel_by_name_counts_every_users_jobs(sky: Sky) -> None:
    """§4.2: the name is looked up among every user's live jobs, not only the caller's."""
    sky.faults(
        {"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]},
        {"command": "jobs.launch", "action": "as_user", "user_hash": "b2", "user_name": "bob"},
    )
    sky.launch("shared")
    sky.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["RUNNING"]})
    sky.launch("shared")

    done = sky("jobs", "cancel", "-y", "-n", "shared")

    assert (done.returncode, "Job IDs: [2, 1]" in done.stdout) == (0, True)
    assert [r["status"] for r in sky.queue("-u")] == ["RUNNING"] * 2


def test_sim_cancel_without_controller_cluster_not_up(sky: Sky) -> None:
    done = sky("jobs", "cancel", "-y", "1")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", NOT_UP)


# -- logs, status, api -----------------------------------------------------------------
def test_sim_logs_job_and_controller(sky: Sky) -> None:
    assert sky("jobs", "logs", "--no-follow", "1").stderr == NOT_UP
    sky.launch("j")
    job = sky("jobs", "logs", "--no-follow", "1")
    controller = sky("jobs", "logs", "--no-follow", "--controller", "1")
    assert job.returncode == controller.returncode == 0
    assert "(t, pid=1001) simulated output" in job.stdout
    assert "Managed job 1 status: PENDING" in controller.stdout


@pytest.mark.parametrize(
    ("statuses", "code"),
    [(["SUCCEEDED"], 0), (["FAILED"], 100), (["PENDING"], 101)],
    ids=["succeeded", "failed", "not-finished"],
)
def test_sim_logs_follow_exits_with_the_jobs_exit_code(
    sky: Sky, statuses: list[str], code: int
) -> None:
    """0.12.2's ``jobs logs --follow`` (the default) ends with the job and exits with its
    JobExitCode; the simulator stops following after $SKYSIM_FOLLOW_SECONDS (101)."""
    sky.faults({"command": "jobs.launch", "action": "timeline", "statuses": statuses})
    sky.launch("j")
    done = sky("jobs", "logs", "1", SKYSIM_FOLLOW_SECONDS="0.2")
    assert done.returncode == code, done.stderr
    assert "(t, pid=1001) simulated output" in done.stdout
    ended = f"✓ Managed job finished: 1 (status: {statuses[0]})." in done.stdout
    assert ended == (code != 101)
    assert sky("jobs", "logs", "--no-follow", "1").returncode == 0  # the log so far, exit 0


def test_sim_status_json_controller_row(sky: Sky) -> None:
    assert json.loads(sky("status", "--refresh", "-o", "json").stdout) == []
    sky.launch("j", "--infra", "k8s/npa-ctx")
    (row,) = json.loads(sky("status", "--refresh", "-o", "json").stdout)
    assert (row["name"], row["status"], row["region"]) == (
        "sky-jobs-controller-alice",
        "UP",
        "npa-ctx",
    )


def test_sim_api_status_and_cancel_in_flight_request(sky: Sky) -> None:
    sky.faults({"command": "jobs.launch", "action": "delay_appearance", "queue_calls": 5})
    request_id = sky.launch("late").stdout.split("request: ")[1].split()[0]
    (active,) = json.loads(sky("api", "status", "-o", "json").stdout)
    assert (active["request_id"], active["status"], active["return_value"]) == (
        request_id,
        "RUNNING",
        "null",
    )
    done = sky("api", "cancel", request_id[:8])
    assert done.stdout == f"Cancelled 1 request: {request_id}\n"
    assert sky("api", "cancel", request_id[:8]).stdout == "No requests need to be cancelled.\n"
    assert json.loads(sky("api", "status", "-o", "json").stdout) == []
    for _ in range(6):
        assert sky("jobs", "queue", "-a", "-o", "json").stderr == NOT_UP  # never appears


# -- down -----------------------------------------------------------------------------
def test_sim_down_in_progress_refused_on_stderr_with_ansi_table(sky: Sky) -> None:
    sky.launch("busy")
    done = sky("down", "sky-jobs-controller-alice", "-y", stdin="delete\n")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "\x1b[33mWARNING: Tearing down the managed jobs controller. Please be aware of the "
        "following:\x1b[0m",
        " * All logs and status information of the managed jobs (output of `sky jobs queue`) "
        "will be lost.",
    ]
    first, *table = done.stderr.splitlines()
    assert first == (
        "sky.exceptions.NotSupportedError: \x1b[31mIn-progress managed jobs found. To avoid "
        "resource leakage, cancel all jobs first: \x1b[1msky jobs cancel -a\x1b[0m"
    )
    assert table[0].startswith("   ID  TASK  NAME")
    assert table[1].split()[:3] == ["1", "-", "busy"] and table[1].startswith("   1")


@pytest.mark.parametrize(
    ("answer", "code"), [("delete\n", 0), ("yes\n", 1), (None, 1)], ids=["delete", "other", "eof"]
)
def test_sim_down_asks_delete_even_with_yes(sky: Sky, answer: str | None, code: int) -> None:
    sky.faults({"command": "jobs.launch", "action": "timeline", "statuses": ["SUCCEEDED"]})
    sky.launch("done")
    done = sky("down", "sky-jobs-controller-alice", "--yes", stdin=answer)
    assert done.returncode == code
    assert "To proceed, please type \x1b[1m'delete'\x1b[0m: " in done.stdout
    if code == 0:
        assert done.stdout.endswith("Terminating cluster sky-jobs-controller-alice...done.\n")
        assert sky("jobs", "queue", "-o", "json").stderr == NOT_UP
        assert sky("down", "sky-jobs-controller-alice", "-y").stdout.endswith(
            "Managed jobs controller has already been torn down.\n"
        )
    else:
        assert done.stderr == "Aborted!\n"
        assert sky.queue()[0]["job_name"] == "done"


@pytest.mark.parametrize(
    "args",
    [("-a", "-y"), ("sky-jobs-controller-*", "-y")],
    ids=["all", "glob"],
)
def test_sim_down_all_or_glob_skips_controller(sky: Sky, args: tuple[str, ...]) -> None:
    sky.launch("j")
    assert sky("down", *args).returncode == 0
    assert sky.queue()[0]["job_name"] == "j"


def test_sim_down_controller_with_other_cluster_usage_error(sky: Sky) -> None:
    done = sky("down", "sky-jobs-controller-alice", "other", "-y")
    assert done.returncode == 2 and done.stderr.startswith("Usage: sky down")


# -- state, faults, concurrency -----------------------------------------------------------
def test_sim_fault_nth_applies_to_that_call_only(sky: Sky) -> None:
    sky.faults({"command": "jobs.queue", "nth": [2], "action": "fail", "kind": "rate_limit"})
    codes = [sky("jobs", "queue", "-o", "json").returncode for _ in range(3)]
    assert codes == [1, 1, 1]
    stderr = [sky("jobs", "queue", "-o", "json").stderr for _ in range(1)]
    assert stderr == [NOT_UP]
    calls = sky.state()["calls"]
    assert [c["n"] for c in calls] == [1, 2, 3, 4]


def test_sim_records_env_names_never_values(sky: Sky) -> None:
    sky.launch("j", "--secret", "HF_TOKEN", HF_TOKEN="canary-0c4f")
    state = sky.state()
    assert "HF_TOKEN" in state["calls"][-1]["env_names"]
    assert "canary-0c4f" not in harness.state_text(sky.root / "runtime" / ".sky")


def test_sim_concurrent_launches_unique_ids(sky: Sky) -> None:
    procs = [
        subprocess.Popen(
            [str(sky.binary), "jobs", "launch", "-n", f"c{i}", "-y", "--async", sky.task()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=sky.env,
            cwd=sky.root,
        )
        for i in range(8)
    ]
    assert [p.wait(timeout=30) for p in procs] == [0] * 8
    jobs = sky.state()["jobs"]
    assert sorted(j["job_id"] for j in jobs) == list(range(1, 9))
    assert len({j["controller_job_id"] for j in jobs}) == 8
    assert {j["name"] for j in jobs} == {f"c{i}" for i in range(8)}
